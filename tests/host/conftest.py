"""The host tests' shared fixtures: one wheelhouse per session (agentc built from this checkout
and its dependencies as wheels), which every real release is made from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.host.wheels import agentc_wheel, dependency_wheels


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    dependency_wheels(out)
    agentc_wheel(out)
    return out
