"""One ``agentc up`` per state directory: two started at once on a new one, and a third while
one runs, are refused with the running one's pid (a lock the kernel releases when it exits,
even by SIGKILL), and the refused one removes nothing; once it stopped, ``up`` resumes there."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.up.kit import Runner, free_port, stop, wait_for

pytestmark = pytest.mark.root


def _running(runner: Runner, state: Path, proc: subprocess.Popen[str]) -> dict[str, Any] | None:
    assert proc.poll() is None, proc.communicate()[0]
    record = state / "up.json"
    if not record.exists() or "children" not in json.loads(record.read_text()):
        return None
    return runner.status()


def test_a_second_up_on_one_state_directory_is_refused(tmp_path: Path) -> None:
    runner, state = Runner(tmp_path), tmp_path / ".agentc"
    first = runner.start("up", "--port", str(free_port()), "--no-live")
    second = runner.start("up", "--port", str(free_port()), "--no-live")
    procs = (first, second)
    try:
        loser = wait_for(
            lambda: next((p for p in procs if p.poll() is not None), None), 120, "neither ended"
        )
        winner = second if loser is first else first
        said = loser.communicate(timeout=30)[0]
        assert loser.returncode == 2, said
        assert f"agentc: agentc up already runs on {state} (pid {winner.pid})" in said, said
        assert "Traceback" not in said
        snap = wait_for(lambda: _running(runner, state, winner), 180, "up did not start")
        assert snap["processes"]["up"]["pid"] == winner.pid  # agentc status: the lock's holder
        later = runner.run("up", "--port", str(free_port()), "--no-live")
        assert later.returncode == 2 and f"(pid {winner.pid})" in later.stderr, later.stderr
        assert "children" in json.loads((state / "up.json").read_text())  # nothing removed
    finally:
        for proc in procs:
            if proc.poll() is None:
                stop(proc)
    # The lock goes with its holder, even one killed: up starts again on the directory.
    started = [runner.start("up", "--no-live")]
    try:
        wait_for(lambda: _running(runner, state, started[0]), 180, "up did not start again")
        started[0].send_signal(signal.SIGKILL)
        started[0].communicate(timeout=60)
        started.append(runner.start("up", "--no-live"))
        wait_for(lambda: _running(runner, state, started[1]), 180, "no resume after SIGKILL")
    finally:
        for proc in started:
            if proc.poll() is None:
                stop(proc)
