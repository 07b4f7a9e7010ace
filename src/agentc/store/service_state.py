"""``service_state``: the installation's small named values (the authority epoch, the clock's
high-water mark, signing keys, a project's digest sender and last read). One home for reading
and writing them."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from agentc.store.sql import fetch_one, run

_GET = "SELECT value FROM service_state WHERE key = :key"
_SET = (
    "INSERT INTO service_state (key, value) VALUES (:key, :value) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_ADD = "INSERT INTO service_state (key, value) VALUES (:key, :value) ON CONFLICT DO NOTHING"
_DELETE = "DELETE FROM service_state WHERE key = :key"


def get_state(conn: Connection, key: str) -> str | None:
    """A ``service_state`` entry (None: not set)."""
    return fetch_one(conn, _GET, str, key=key)


def set_state(conn: Connection, key: str, value: str) -> None:
    """Set a ``service_state`` entry, made if missing (one statement: two first writers on
    PostgreSQL do not collide)."""
    run(conn, _SET, key=key, value=value)


def add_state(conn: Connection, key: str, value: str) -> str:
    """The entry's value, set to ``value`` only if it had none (the first writer wins)."""
    run(conn, _ADD, key=key, value=value)
    found = get_state(conn, key)
    assert found is not None
    return found


def delete_state(conn: Connection, key: str) -> None:
    run(conn, _DELETE, key=key)
