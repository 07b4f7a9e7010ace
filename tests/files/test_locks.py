"""files.locks, the one home of advisory locks: hold, wait, locked, holding, held and holder,
tried from a second process (a flock is per open file description: another process is what
it keeps out)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from agentc.files import locks

SPAWN = multiprocessing.get_context("spawn")


def _hold_then_wait(path: str, ready: Event, go: Event) -> None:
    fd = locks.hold(Path(path))
    assert fd is not None
    ready.set()
    go.wait(30)
    os.close(fd)


@pytest.fixture
def other(tmp_path: Path) -> Iterator[tuple[Path, Event, BaseProcess]]:
    """Another process holding ``tmp_path / "lock"`` until the test lets it go."""
    path = tmp_path / "lock"
    ready, go = SPAWN.Event(), SPAWN.Event()
    proc = SPAWN.Process(target=_hold_then_wait, args=(str(path), ready, go))
    proc.start()
    assert ready.wait(30)
    yield path, go, proc
    go.set()
    proc.join(30)


def test_a_free_lock_is_held_and_let_go(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    fd = locks.hold(path)
    assert fd is not None
    assert os.stat(path).st_mode & 0o777 == 0o600
    os.close(fd)
    with locks.holding(path) as held:
        assert held
    with locks.locked(path):
        pass
    with locks.locked(path, shared=True), locks.locked(path, shared=True):
        pass  # two readers at once (two open file descriptions, one process)
    assert not locks.held(path)


def test_another_process_keeps_the_lock(other: tuple[Path, Event, BaseProcess]) -> None:
    path, go, proc = other
    assert locks.hold(path) is None
    with locks.holding(path) as held:
        assert not held
    assert locks.held(path)
    assert locks.holder(path) == proc.pid
    go.set()
    proc.join(30)
    with locks.locked(path):  # waited for, then free
        assert locks.holder(path) == os.getpid()
    assert not locks.held(path)


def test_never_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    link = tmp_path / "lock"
    link.symlink_to(target)
    for take in (locks.hold, locks.wait):
        with pytest.raises(OSError):
            take(link)
    with pytest.raises(OSError), locks.locked(link):
        pass
    assert not target.exists()
    assert not locks.held(link)
