"""``[setup.<project>]`` in host mode, for real: root runs the loop, and the project's setup
command runs as the implementer account (in the launch's own sandbox, in the fork that becomes
that account), before the harness; a failing setup releases the attempt with its log's tail
and the harness never starts; a loop stopped during the setup ends it and releases the attempt.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.supervisor.kit import mkdir_owned
from tests.supervisor.loop.host_kit import HostLoop

pytestmark = pytest.mark.root
PLANTED = ["impl/runs/other-launch", "rev/runs/some-review"]  # the host fixture's own


def _setup(host: HostLoop, script: str, timeout: int = 600) -> Path:
    """A setup command with a cache the implementer account owns; returns the cache."""
    impl = host.accounts["implementer"]
    cache = mkdir_owned(host.root / "cache", impl.uid, impl.gid, 0o700)
    script = script.replace("{c}", str(cache))
    host.loop.extra = (
        f"command = {json.dumps(['sh', '-c', script])}\n"
        f"cache_paths = {json.dumps([str(cache)])}\n"
        f"timeout_seconds = {timeout}\n"
    )
    host.loop.write_config()
    return cache


def test_the_setup_runs_as_the_implementer_account_before_the_harness(host: HostLoop) -> None:
    loop, impl = host.loop, host.accounts["implementer"]
    cache = _setup(host, "id -u > {c}/setup-uid; stat -c %u . > {c}/clone-owner; echo set up")
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr + loop.tails()
    assert (cache / "setup-uid").read_text().strip() == str(impl.uid)
    assert (cache / "clone-owner").read_text().strip() == str(impl.uid)
    assert os.stat(cache / "setup-uid").st_uid == impl.uid
    # The harness ran after it, as the same account, and submitted.
    assert loop.show(task["id"])["work_status"] == "waiting_review", loop.tails()
    assert sorted(loop.leftovers()) == PLANTED


def test_a_failing_setup_releases_the_attempt_with_its_output(host: HostLoop) -> None:
    loop = host.loop
    _setup(host, "echo fetching; echo the-registry-is-down >&2; exit 3")
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "project setup failed (exit code 3)" in result.stderr, result.stderr
    [final] = loop.records("finished")
    assert final["outcome"] == "released"
    attempt = loop.show(task["id"])
    assert attempt["work_status"] == "ready"
    handoff = loop.attempt(final["attempt"])["attempt"]["handoff"]
    assert "project setup failed (exit code 3)" in handoff
    assert "the-registry-is-down" in handoff  # the log's tail, read by root from the run
    assert "did not start" not in handoff  # named as the setup's failure, not the launch's
    kept = loop.state / "loop/unsubmitted" / final["launch_id"] / "setup.log"
    assert "fetching" in kept.read_text()
    assert sorted(loop.leftovers()) == PLANTED


def test_a_loop_stopped_during_the_setup_ends_it_and_releases(host: HostLoop) -> None:
    loop = host.loop
    cache = _setup(host, "echo $$ > {c}/setup-pid; exec sleep 600")
    loop.write_config(heartbeat_seconds=1)
    task = loop.task()
    heartbeat = loop.state / "loop/heartbeat.json"

    def beaten() -> bool:  # during the setup, as during a launch
        if not heartbeat.exists():
            return False
        return bool(json.loads(heartbeat.read_text()).get("launch", {}).get("task") == task["id"])

    proc = loop.start()
    try:
        loop.wait_for(lambda: (cache / "setup-pid").exists(), why=lambda: loop.tails())
        loop.wait_for(beaten, timeout=30, why="no heartbeat during the setup")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "project setup was stopped: the host supervisor stopped" in err, err
    # The setup's own process (its shell exec'd sleep: the same pid) is gone; other tests'
    # processes are not this test's business.
    setup_pid = (cache / "setup-pid").read_text().strip()
    assert _cmdline(setup_pid) != "sleep\x00600\x00"
    assert loop.show(task["id"])["work_status"] == "ready"
    assert sorted(loop.leftovers()) == PLANTED


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""
