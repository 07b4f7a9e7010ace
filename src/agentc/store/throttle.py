"""Sign-in failures: the sign-in throttle's record (`agentc.service.signin.LoginLimiter` holds
the rule), in the database so that every service process counts the same failures; and the key
that signs the throttle's device cookies.

A failure is a row: the source it came from, the account's name (folded), when, and the device
cookie it came with when that cookie was valid for the account (its own lane) or None (the
account's lane for every other client).
"""

from __future__ import annotations

import secrets
from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.store.service_state import add_state, get_state
from agentc.store.sql import fetch_one, run


class Lane(NamedTuple):
    """A lane's failures since the time asked for."""

    failures: int
    last: int | None  # when the latest was


_SOURCE = (
    "SELECT count(*) FROM sign_in_failures "
    "WHERE address = :address AND device IS NULL AND failed_at > :since"
)
_ACCOUNT = (
    "SELECT count(*), max(failed_at) FROM sign_in_failures "
    "WHERE name = :name AND device IS NULL AND failed_at > :since"
)
_DEVICE = (
    "SELECT count(*), max(failed_at) FROM sign_in_failures "
    "WHERE device = :device AND failed_at > :since"
)
_RECORD = (
    "INSERT INTO sign_in_failures (address, name, failed_at, device) "
    "VALUES (:address, :name, :now, :device)"
)
_FORGET_DEVICE = "DELETE FROM sign_in_failures WHERE device = :device"
_FORGET_BEFORE = "DELETE FROM sign_in_failures WHERE failed_at <= :before"
_DEVICE_KEY = "sign_in_device_key"


def source_failures(conn: Connection, address: str, since: int) -> int:
    """Failures from the source without a valid device cookie, after since."""
    found = fetch_one(conn, _SOURCE, int, address=address, since=since)
    return found or 0


def account_failures(conn: Connection, name: str, since: int) -> Lane:
    """The account's lane: failures with the name from any source without a valid device
    cookie, after since."""
    found = fetch_one(conn, _ACCOUNT, Lane, name=name, since=since)
    assert found is not None  # an aggregate always yields its row
    return found


def device_failures(conn: Connection, device: str, since: int) -> Lane:
    """A device's lane: failures that came with that device cookie, after since."""
    found = fetch_one(conn, _DEVICE, Lane, device=device, since=since)
    assert found is not None
    return found


def record_failure(conn: Connection, address: str, name: str, device: str | None, now: int) -> None:
    """One failed sign-in (or current-password check) with name (folded, as the throttle keys
    it) from address, in a device's lane or (None) the account's."""
    run(conn, _RECORD, address=address, name=name, device=device, now=now)


def forget_device(conn: Connection, device: str) -> None:
    """A success clears its device's lane."""
    run(conn, _FORGET_DEVICE, device=device)


def forget_before(conn: Connection, before: int) -> None:
    """Drop the failures no rule looks at any more (the record stays small)."""
    run(conn, _FORGET_BEFORE, before=before)


def service_key(conn: Connection, name: str) -> str | None:
    """A signing key of the service (hex) kept in ``service_state``, None until it is made."""
    return get_state(conn, name)


def service_key_made(conn: Connection, name: str) -> str:
    """The signing key ``name``, made (32 random bytes) the first time: the first writer's key
    wins, so every service process signs with the same one."""
    return add_state(conn, name, secrets.token_hex(32))


def device_key(conn: Connection) -> str | None:
    """The key that signs device cookies (hex), None until the first is made."""
    return service_key(conn, _DEVICE_KEY)


def device_key_made(conn: Connection) -> str:
    """The key that signs device cookies, made the first time (:func:`service_key_made`)."""
    return service_key_made(conn, _DEVICE_KEY)
