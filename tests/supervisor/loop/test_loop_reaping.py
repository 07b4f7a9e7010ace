"""A long-running loop is a child subreaper: what its launches orphan to it is reaped.

Each launch's end reaps only that launch's processes (tests/supervisor/test_two_launches.py);
whatever else ended work orphaned to the loop (here: the push helper's program leaves a
short-lived child and a sleeper behind, both re-parented to the loop) is killed and reaped by
the loop itself, so no zombie piles up however many launches it runs.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from agentc.sandbox import reaper
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import SUBMITTING_AGENT, make_loop_kit


def _zombies_and_sleepers(pid: int, tag: str) -> list[str]:
    """What is left below the loop: zombies, and the helper's sleepers."""
    left = []
    for child, proc in reaper.tree(pid).items():
        if proc.state == "Z":
            left.append(f"zombie {child} ({proc.comm})")
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if tag.encode() in b" ".join(argv):
            left.append(f"sleeper {child}")
    return left


def test_a_long_running_loop_leaves_no_zombie_and_no_orphan(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    tag = f"31{time.monotonic_ns() % 10**6}"
    wrapper = short_tmp / "helper.sh"
    # Two orphans per launch: one exits at once (a zombie unless the loop reaps it), one lives.
    wrapper.write_text(f'#!/bin/sh\n(true &)\n(exec sleep {tag} &)\nexec "$@"\n')
    wrapper.chmod(0o755)
    loop = make_loop_kit(
        short_tmp,
        server,
        admin,
        SUBMITTING_AGENT,
        push_helper={"program": [str(wrapper), sys.executable, "-m", "agentc.push.cli"]},
    )
    loop.write_config(poll_seconds=1)
    tasks = [loop.task(f"task {n}") for n in range(3)]
    proc = loop.run_forever()
    try:
        loop.wait_for(
            lambda: len(loop.records("finished")) == 3 and not loop.records(),
            why=lambda: loop.records("finished"),
        )
        for task in tasks:
            assert loop.show(task["id"])["work_status"] == "waiting_review"
        loop.wait_for(
            lambda: not _zombies_and_sleepers(proc.pid, tag),
            timeout=30,
            why=lambda: _zombies_and_sleepers(proc.pid, tag),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    err = loop.log.read_text()
    assert proc.returncode == 0, err
    assert "killed" in err and "leftover launch processes (sleep" in err, err
    left = subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True, text=True)
    assert left.stdout == ""
