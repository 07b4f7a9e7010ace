from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit.shared_server import admin, server

__all__ = ["admin", "server"]


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short root: relay socket paths under the run must stay under 108 bytes."""
    root = Path(tempfile.mkdtemp(prefix="lp", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)
