"""Fixtures and hooks for every test: the databases, a live coordinator, a clean environment.

Two rules hold for the whole suite:

- A test marked ``root`` is skipped, with the reason, when the run is not root (``-m "not root"``
  deselects them instead).
- No setting or credential leaks in from the developer's environment: the variables named by
  :data:`SCRUBBED_PREFIXES` are removed before collection (so session fixtures and every
  subprocess they start see the clean environment) and again before each test.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from agentc.sandbox import reaper
from tests.kit import pg

pytest_plugins = ["pytester"]

# The coordinator's and the client's settings, agentns' session variables, and the model
# credentials and settings Claude Code, Codex and Pi read.
SCRUBBED_PREFIXES = (
    "COORDINATOR_",
    "AGENT_COORDINATOR_",
    "AGENTNS_",
    "ANTHROPIC_",
    "CLAUDE_",
    "OPENAI_",
    "CODEX_",
    "PI_",
)
ROOT_SKIP_REASON = "needs root (marked root); run as root, or deselect with -m 'not root'"


def scrubbed(names: Iterable[str]) -> list[str]:
    """The variable names among ``names`` that tests must not see."""
    return [name for name in names if name.startswith(SCRUBBED_PREFIXES)]


def pytest_configure(config: pytest.Config) -> None:
    for name in scrubbed(os.environ):
        del os.environ[name]


@pytest.hookimpl(trylast=True)  # after the conftests that add the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The long tests first (a stable sort keeps the rest in order), so that in a parallel run
    # they start early rather than leave one worker running a long test alone at the end.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason=ROOT_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("root") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _not_a_subreaper() -> Iterator[None]:
    """A test that runs a launch's or a setup command's code in-process marks the test process a
    child subreaper (loop/setup.py, launch/execute.py). Left marked, every process a later test's
    programs orphan (an `agentc up` under a throwaway user, a supervisor killed with SIGKILL)
    would become this process's zombie, never reaped, and still look alive to the loop's
    "an earlier launch may still run" check. Unmarked after each test, orphans go to init."""
    yield
    reaper.prctl(reaper.PR_SET_CHILD_SUBREAPER, 0)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing a previous test (or a plugin) set in ``os.environ`` reaches this one."""
    for name in scrubbed(os.environ):
        monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PgServer]:
    server = pg.start()
    yield server
    pg.stop(server)


_counter = itertools.count()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "coordinator.sqlite3")
    server: pg.PgServer = request.getfixturevalue("pg_server")
    return server.create_database(f"t{next(_counter)}_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def sqlite_database(tmp_path: Path) -> str:
    return str(tmp_path / "coordinator.sqlite3")


@pytest.fixture
def live(database: str, tmp_path: Path) -> Iterator[object]:
    """A real coordinator subprocess over each backend (see tests/kit/live.py)."""
    from tests.kit.live import live_server

    with live_server(database, tmp_path) as server:
        yield server
