from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import pg


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PgServer]:
    server = pg.start()
    yield server
    pg.stop(server)


_counter = itertools.count()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "coordinator.sqlite3")
    server: pg.PgServer = request.getfixturevalue("pg_server")
    return server.create_database(f"t{next(_counter)}_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def sqlite_database(tmp_path: Path) -> str:
    return str(tmp_path / "coordinator.sqlite3")


@pytest.fixture
def live(database: str, tmp_path: Path) -> Iterator[object]:
    """A real coordinator subprocess over each backend (see tests/live.py)."""
    from tests.kit.live import live_server

    with live_server(database, tmp_path) as server:
        yield server
