"""Fixtures of the agentc-attention tests: a live coordinator on SQLite (what these tests
exercise is the attention program and the protocols it speaks; the store's part, the digest's
read tracking, is tested on both databases in tests/service/test_attention.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.attention.kit import Receiver, Setup, receiver, set_up
from tests.kit.live import LiveServer, live_server


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One coordinator for the package's tests: each sets up a project of its own."""
    root = tmp_path_factory.mktemp("coordinator")
    with live_server(str(root / "coordinator.sqlite3"), root) as found:
        yield found


@pytest.fixture
def setup(server: LiveServer, tmp_path: Path) -> Setup:
    return set_up(server, tmp_path)


@pytest.fixture
def lone_setup(sqlite_database: str, tmp_path: Path) -> Iterator[Setup]:
    """A set-up on a coordinator of the test's own, for a test that stops it."""
    with live_server(sqlite_database, tmp_path) as found:
        yield set_up(found, tmp_path)


@pytest.fixture
def ntfy() -> Iterator[Receiver]:
    with receiver() as rec:
        yield rec


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with receiver() as rec:
        yield rec
