"""Sign-in failures: the sign-in throttle's record (`agentc.service.auth.LoginLimiter` holds the
rule), in the database so that every service process counts the same failures."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.store.sql import fetch_one, run


class Failures(NamedTuple):
    """What the throttle decides on, for one address and one name from it."""

    of_address: int  # the address's failures since the given time
    of_name: int  # the name's failures from the address since the given time
    last_of_name: int | None  # when the latest of those was


_FAILURES = (
    "SELECT (SELECT count(*) FROM sign_in_failures "
    "WHERE address = :address AND failed_at > :address_since), "
    "count(*), max(failed_at) FROM sign_in_failures "
    "WHERE address = :address AND name = :name AND failed_at > :name_since"
)
_RECORD = "INSERT INTO sign_in_failures (address, name, failed_at) VALUES (:address, :name, :now)"
_FORGET_NAME = "DELETE FROM sign_in_failures WHERE address = :address AND name = :name"
_FORGET_BEFORE = "DELETE FROM sign_in_failures WHERE failed_at <= :before"


def failures(
    conn: Connection, address: str, name: str, address_since: int, name_since: int
) -> Failures:
    found = fetch_one(
        conn,
        _FAILURES,
        Failures,
        address=address,
        name=name,
        address_since=address_since,
        name_since=name_since,
    )
    assert found is not None  # an aggregate always yields its row
    return found


def record_failure(conn: Connection, address: str, name: str, now: int) -> None:
    """One failed sign-in with name (lower case, as the throttle keys it) from address."""
    run(conn, _RECORD, address=address, name=name, now=now)


def forget_name(conn: Connection, address: str, name: str) -> None:
    """A success clears the name's failures on that address."""
    run(conn, _FORGET_NAME, address=address, name=name)


def forget_before(conn: Connection, before: int) -> None:
    """Drop the failures no rule looks at any more (the record stays small)."""
    run(conn, _FORGET_BEFORE, before=before)
