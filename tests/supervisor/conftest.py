from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.kit import Kit, cleanup, make_kit


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the ``kit`` fixture is a ``root`` test: the kit's tree is root's."""
    for item in items:
        if "kit" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.root)


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[Kit]:
    """A personal-mode kit owned by root, run as the current user (root)."""
    built = make_kit(tmp_path / "kit")
    yield built
    cleanup(tmp_path / "kit")
