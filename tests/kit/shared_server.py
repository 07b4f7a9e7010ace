"""Package-scoped fixtures for test packages that share one real coordinator (SQLite): each
package's conftest imports them, so every package gets its own server and signed-in admin
(sign-ins are rate limited)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.kit.live import LiveServer, live_server


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real coordinator (SQLite) shared by the package's tests; each makes its project."""
    root = tmp_path_factory.mktemp("coordinator")
    with live_server(str(root / "coordinator.sqlite3"), root) as live:
        yield live


@pytest.fixture(scope="package")
def admin(server: LiveServer) -> Iterator[httpx.Client]:
    """One signed-in admin."""
    client = server.admin_client()
    yield client
    client.close()
