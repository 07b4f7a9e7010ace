from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.kit.live import LiveServer, live_server


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real coordinator (SQLite) for the loop's tests."""
    root = tmp_path_factory.mktemp("coordinator")
    with live_server(str(root / "coordinator.sqlite3"), root) as live:
        yield live


@pytest.fixture(scope="package")
def admin(server: LiveServer) -> Iterator[httpx.Client]:
    client = server.admin_client()
    yield client
    client.close()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short root: relay socket paths under the run must stay under 108 bytes."""
    root = Path(tempfile.mkdtemp(prefix="lp", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)
