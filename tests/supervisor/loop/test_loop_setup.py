"""``[setup.<project-id>]`` setup commands in the live loop, with real parts: the command runs
in the clone inside the launch's own bwrap sandbox before the harness, with the cache paths
bound writable; a failing or timed-out setup releases the attempt with a handoff naming the
failure and its output, and the harness never starts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx

from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import LoopKit, make_loop_kit

# Records what it saw of the setup (its log, the cache, the clone), then exits 0 unsubmitted.
OBSERVING_AGENT = """#!/bin/sh
cat > /dev/null
echo '{"type": "agent", "step": "start"}'
cache="$(cat .cache-path)"
{
  echo "agent-ran"
  cat "$(dirname "$TMPDIR")/setup.log"
  cat "$cache/fetched"
  cat built.txt
} > "$cache/seen-by-agent.txt"
"""
# Leaves a mark in the cache if it ever runs.
MARKING_AGENT = """#!/bin/sh
cat > /dev/null
touch "$(cat .cache-path 2>/dev/null || echo /nonexistent)/agent-ran"
"""


def _setup(loop: LoopKit, command: list[str], cache: Path, timeout: int = 900) -> None:
    loop.extra = (
        f"command = {json.dumps(command)}\n"
        f"cache_paths = {json.dumps([str(cache)])}\n"
        f"timeout_seconds = {timeout}\n"
    )
    loop.write_config()


def _cache(loop: LoopKit, root: Path) -> Path:
    cache = root / "cache"
    cache.mkdir()
    # The agents find the cache through a file the setup writes into the clone.
    return cache


def _handoff(loop: LoopKit, attempt_id: str) -> str:
    handoff: str = loop.attempt(attempt_id)["attempt"]["handoff"] or ""
    return handoff


def test_the_setup_runs_confined_in_the_clone_before_the_harness(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, OBSERVING_AGENT)
    cache = _cache(loop, short_tmp)
    script = (
        f"echo {cache} > .cache-path; "
        f"echo setup-ran uid=$(id -u) cwd=$(pwd); "
        f"echo fetched > {cache}/fetched; echo built > built.txt; "
        f"if [ -e {loop.state}/loop ]; then echo state-visible; else echo state-masked; fi; "
        f"if echo x > /etc/agentc-setup-probe 2>/dev/null; then echo root-writable; "
        f"else echo root-readonly; fi"
    )
    _setup(loop, ["sh", "-c", script], cache)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr
    seen = (cache / "seen-by-agent.txt").read_text()
    lines = seen.splitlines()
    assert lines[0] == "agent-ran", seen
    ran = next(x for x in lines if x.startswith("setup-ran"))
    # As root, the launch maps the user to nobody; the setup ran in the clone.
    assert "uid=65534" in ran and "/impl/clones/" in ran, seen
    assert "state-masked" in lines and "root-readonly" in lines, seen
    assert "fetched" in lines and "built" in lines, seen  # the cache and the clone carry over
    assert not os.path.exists("/etc/agentc-setup-probe")
    [final] = loop.records("finished")
    assert final["outcome"] == "released"
    assert loop.show(task["id"])["work_status"] == "ready"
    assert loop.leftovers() == []


def test_a_failing_setup_releases_with_its_exit_code_and_output(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, MARKING_AGENT)
    cache = _cache(loop, short_tmp)
    script = (
        f"echo {cache} > .cache-path; echo preparing the build; "
        "echo 'error: the lock file needs to be updated' >&2; exit 3"
    )
    _setup(loop, ["sh", "-c", script], cache)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "project setup failed (exit code 3)" in result.stderr, result.stderr
    assert not (cache / "agent-ran").exists(), "the harness must not start"
    [final] = loop.records("finished")
    assert final["outcome"] == "released" and final["pid"] is None
    handoff = _handoff(loop, final["attempt"])
    assert "the launch failed: project setup failed (exit code 3)" in handoff, handoff
    assert "error: the lock file needs to be updated" in handoff, handoff
    assert "Read the last checkpoint before resuming." in handoff
    kept = loop.state / "loop/unsubmitted" / final["launch_id"] / "setup.log"
    assert "preparing the build" in kept.read_text()
    assert str(kept.parent) in handoff
    assert loop.show(task["id"])["work_status"] == "ready"
    assert loop.leftovers() == []
    # A failed setup is no empty exit: nothing counts toward the holds.
    assert not (loop.state / "loop/unsubmitted.json").exists()


def test_a_setup_past_its_timeout_is_killed_and_released(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, MARKING_AGENT)
    cache = _cache(loop, short_tmp)
    marker = f"agentc-setup-sleeper-{os.getpid()}"
    script = f"echo {cache} > .cache-path; echo fetching; exec -a {marker} sleep 600"
    _setup(loop, ["bash", "-c", script], cache, timeout=1)
    task = loop.task()
    started = time.monotonic()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 90
    assert "project setup ran longer than 1 s" in result.stderr, result.stderr
    [final] = loop.records("finished")
    handoff = _handoff(loop, final["attempt"])
    assert "project setup ran longer than 1 s" in handoff and "fetching" in handoff, handoff
    assert not (cache / "agent-ran").exists()
    assert not _running(marker), "the setup's process survived its timeout"
    assert loop.show(task["id"])["work_status"] == "ready"
    assert loop.leftovers() == []


def _running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def test_a_bad_cache_path_refuses_to_start_naming_the_key(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, MARKING_AGENT)
    real = short_tmp / "real-cache"
    real.mkdir()
    link = short_tmp / "linked-cache"
    link.symlink_to(real)
    for cache, why in (
        (short_tmp / "missing", "cannot be used"),
        (link, "without symlinks"),
        (loop.state / "impl", "overlaps the state root"),
    ):
        _setup(loop, ["true"], cache)
        result = loop.once()
        assert result.returncode != 0
        assert f"setup.{loop.project}.cache_paths" in result.stderr, result.stderr
        assert why in result.stderr, result.stderr
        assert not (loop.state / "loop").exists(), "nothing may be written"
