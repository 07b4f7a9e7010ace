"""The driver-level query layer: typed rows, and driver errors raised as SQLAlchemy's."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from agentc.store.accounts import Principal
from agentc.store.engine import Database, migrate, open_engine
from agentc.store.sql import fetch_row, insert
from agentc.store.tx import Executor


def test_rows_round_trip_and_a_duplicate_key_is_an_integrity_error(database: str) -> None:
    engine = open_engine(Database.parse(database))
    migrate(engine)
    executor = Executor(engine)
    try:
        admin = Principal("p1", "admin", "human", "admin", None, None, 1)
        executor.write(lambda tx: insert(tx.conn, admin))
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p1")) == admin
        assert executor.read(lambda tx: fetch_row(tx.conn, Principal, "p2")) is None
        with pytest.raises(IntegrityError):
            executor.write(lambda tx: insert(tx.conn, admin._replace(name="other")))
    finally:
        executor.close()
