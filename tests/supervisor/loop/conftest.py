from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit.shared_server import admin, server
from tests.supervisor.kit import create_user, delete_user
from tests.supervisor.loop.host_kit import accounts, host

__all__ = ["accounts", "admin", "host", "server"]


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short root: relay socket paths under the run must stay under 108 bytes."""
    root = Path(tempfile.mkdtemp(prefix="lp", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def account() -> Iterator[str]:
    """An unprivileged account the loop runs as when it takes reviews (a reviewer's candidate
    sandbox cannot nest under a root launcher)."""
    name = create_user("agentc-r")
    try:
        yield name
    finally:
        delete_user(name)
