"""Fixtures for the agentns-claude tests: the installed command, a clean environment.

Every test drives the real console script in a subprocess. The environment (scrubbed of
``AGENTNS_*`` by tests/conftest.py) points the mock file and the procfs read-back at paths that
do not exist, so a stray ``/tmp/agentns-mock`` on the machine (or a wintermute kernel) never
changes a result.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agentns.kit import LAUNCHER

Run = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture(scope="session")
def launcher() -> str:
    assert LAUNCHER, "agentns-claude is not installed in the venv (run `uv sync`)"
    return LAUNCHER


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)  # tests/conftest.py scrubbed AGENTNS_* from it
    env["AGENTNS_MOCK_FILE"] = str(tmp_path / "no-such-mock")
    env["AGENTNS_SESSION_PATH"] = str(tmp_path / "no-such-agent-session")
    return env


@pytest.fixture
def run(launcher: str, base_env: dict[str, str]) -> Run:
    """``run(*args, env={...extra}, timeout=60)`` -> CompletedProcess with text output."""

    def _run(
        *args: str, env: dict[str, str | None] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        full = dict(base_env)
        for k, v in (env or {}).items():
            if v is None:
                full.pop(k, None)
            else:
                full[k] = v
        return subprocess.run(
            [launcher, *args], env=full, capture_output=True, text=True, timeout=timeout
        )

    return _run


@pytest.fixture
def fake_bin(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    """Write executable scripts into a directory; yields ``make(name, body) -> dir``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()

    def make(name: str, body: str) -> Path:
        script = bindir / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
        return bindir

    yield make
