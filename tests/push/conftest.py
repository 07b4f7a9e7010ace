from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.push.kit import Helper, make_repos, start_helper


@pytest.fixture
def base() -> Iterator[Path]:
    """A short directory under /tmp, so the socket path stays under 93 bytes."""
    path = Path(tempfile.mkdtemp(prefix="ap-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def repos(base: Path) -> tuple[Path, Path]:
    return make_repos(base)


@pytest.fixture
def remote(repos: tuple[Path, Path]) -> Path:
    return repos[0]


@pytest.fixture
def checkout(repos: tuple[Path, Path]) -> Path:
    return repos[1]


@pytest.fixture
def helper(base: Path, remote: Path) -> Iterator[Helper]:
    """A helper in personal mode (no --parent-pid): the test process is its parent."""
    started = start_helper(base, remote)
    yield started
    started.stop()
