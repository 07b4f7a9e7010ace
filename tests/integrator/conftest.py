from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.kit.live import LiveServer, live_server


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real coordinator (SQLite) shared by the integrator tests; each makes its project."""
    root = tmp_path_factory.mktemp("coordinator")
    with live_server(str(root / "coordinator.sqlite3"), root) as live:
        yield live


@pytest.fixture(scope="package")
def admin(server: LiveServer) -> Iterator[httpx.Client]:
    client = server.admin_client()
    yield client
    client.close()
