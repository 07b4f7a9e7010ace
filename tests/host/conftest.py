"""The host tests' shared fixtures: the dependency wheels and agentc's own wheel, built once per
session from this checkout, which every real release is made from; one real coordinator for the
package (the updater's loop binds to it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.host.wheels import agentc_wheel, dependency_wheels
from tests.kit.shared_server import admin, server

__all__ = ["admin", "agentc_010", "server", "wheelhouse"]


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """agentc's dependencies as wheels (one folder, nothing else in it)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    dependency_wheels(out)
    return out


@pytest.fixture(scope="session")
def agentc_010(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout (version 0.1.0)."""
    return agentc_wheel(tmp_path_factory.mktemp("agentc"))
