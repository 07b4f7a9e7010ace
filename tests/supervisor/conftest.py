from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from launchkit import Kit, cleanup, make_kit


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[Kit]:
    """A personal-mode kit run as the current user (root in CI)."""
    built = make_kit(tmp_path / "kit")
    yield built
    cleanup(tmp_path / "kit")
