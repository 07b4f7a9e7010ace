"""The driver-level query layer: typed rows, and driver errors raised as SQLAlchemy's."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from agentc.core.errors import CoordinatorError
from agentc.store.accounts import Principal
from agentc.store.engine import Database, migrate, open_engine
from agentc.store.sql import fetch_row, insert
from agentc.store.tx import Executor, Tx


def test_rows_round_trip_and_a_duplicate_key_is_an_integrity_error(database: str) -> None:
    engine = open_engine(Database.parse(database))
    migrate(engine)
    executor = Executor(engine)
    try:
        admin = Principal("p1", "admin", "human", "admin", None, None, 1, "admin")
        executor.write(lambda tx: insert(tx.conn, admin))
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p1")) == admin
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p2")) is None
        with pytest.raises(IntegrityError):
            executor.write(lambda tx: insert(tx.conn, admin._replace(name="other")))
    finally:
        executor.close()


def test_deferred_writes_are_seen_later_committed_with_the_transaction_or_not_at_all(
    database: str,
) -> None:
    """A deferred write (on PostgreSQL sent with the next query or the COMMIT) is seen by the
    transaction's later queries, commits with it, is gone when the mutation is refused, and
    its error (a duplicate key) fails the whole transaction."""
    engine = open_engine(Database.parse(database))
    migrate(engine)
    executor = Executor(engine)
    admin = Principal("p1", "admin", "human", "admin", None, None, 1, "admin")

    def insert_then_read(tx: Tx, row: Principal) -> Principal | None:
        insert(tx.conn, row, deferred=True)
        return fetch_row(tx.conn, Principal, "p1")

    def refused(tx: Tx) -> None:
        insert(tx.conn, admin._replace(id="p9", name="nine", name_key="nine"), deferred=True)
        raise CoordinatorError("invalid_input", "no", status=422)

    try:
        seen = executor.write(lambda tx: insert_then_read(tx, admin))
        assert seen == admin
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p1")) == admin
        with pytest.raises(CoordinatorError):
            executor.write(refused)
        with pytest.raises(IntegrityError):  # raised by the commit it was sent with
            executor.write(lambda tx: insert(tx.conn, admin._replace(name="x"), deferred=True))
        with pytest.raises(IntegrityError):  # ...or by the next query
            executor.write(lambda tx: insert_then_read(tx, admin._replace(name="x")))
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p9")) is None
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p1")) == admin
        # The connections went back to the pool in the driver's own transaction mode.
        executor.write(
            lambda tx: insert(tx.conn, admin._replace(id="p2", name="two", name_key="two"))
        )
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p2")) is not None
    finally:
        executor.close()
