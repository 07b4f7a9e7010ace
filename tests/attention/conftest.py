"""Fixtures of the agentc-attention tests: a live coordinator on SQLite (what these tests
exercise is the attention program and the protocols it speaks; the store's part, the digest's
read tracking, is tested on both databases in tests/service/test_attention.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.attention.kit import Receiver, Setup, receiver, set_up
from tests.kit.live import LiveServer, live_server


@pytest.fixture
def server(sqlite_database: str, tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(sqlite_database, tmp_path) as found:
        yield found


@pytest.fixture
def setup(server: LiveServer, tmp_path: Path) -> Setup:
    return set_up(server, tmp_path)


@pytest.fixture
def ntfy() -> Iterator[Receiver]:
    with receiver() as rec:
        yield rec


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with receiver() as rec:
        yield rec
