from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.kit import Kit, cleanup, make_kit


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[Kit]:
    """A personal-mode kit run as the current user (root in CI)."""
    built = make_kit(tmp_path / "kit")
    yield built
    cleanup(tmp_path / "kit")
