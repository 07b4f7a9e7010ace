"""``agentc up`` starts again a program of its tree that died: the supervisor loop killed with
SIGKILL in the middle of a launch (its restart settles the launch it had, the task lands, no
lease is left held, no launch left running), then the egress proxy, the integrator and the
coordinator; a coordinator that keeps exiting at once (its port taken) is given up on with a
clear message, and everything else is stopped."""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentc.up.sample import plan_description
from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, admin_client, file_task, free_port, processes_of, stop, wait_for

pytestmark = [pytest.mark.root, pytest.mark.slow]  # a throwaway user needs root

# A test the example agent's change adds and every later run of the repository's tests runs:
# it keeps the implementer's launch running for a few seconds, long enough to be killed in.
SLOW_TEST = (
    "import time\nimport unittest\n\n\nclass SlowTest(unittest.TestCase):\n"
    "    def test_slow(self) -> None:\n        time.sleep(4)\n"
)


@pytest.fixture
def user() -> Iterator[str]:
    name = create_user("agentc-r")
    try:
        yield name
    finally:
        delete_user(name)


def _record(state: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((state / "up.json").read_text())
    return data


def _launches(state: Path) -> list[dict[str, Any]]:
    folder = state / "supervisor/loop/launches"
    found = []
    for path in folder.glob("*.json") if folder.exists() else []:
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # being replaced
    return found


def _logs(state: Path) -> str:
    logs = sorted((state / "logs").glob("*.log")) if state.exists() else []
    return "\n".join(f"{p.name}:\n{p.read_text()[-3000:]}" for p in logs)


def _task(state: Path, project: str, task: str) -> dict[str, Any]:
    with closing(admin_client(state)) as admin:
        got = admin.get(f"/api/v1/projects/{project}/tasks/{task}")
        assert got.status_code == 200, got.text
        data: dict[str, Any] = got.json()["data"]
        return data


def _restarted(state: Path, name: str, old: int) -> int | None:
    pid = _record(state).get("children", {}).get(name)
    return pid if pid not in (None, old) else None


def test_the_supervisor_killed_mid_launch_then_the_others(user: str) -> None:
    entry = pwd.getpwnam(user)
    work = Path(entry.pw_dir) / "restart"
    work.mkdir()
    os.chown(work, entry.pw_uid, entry.pw_gid)
    runner = Runner(work, user)
    state = work / ".agentc"
    port = free_port()
    proc = runner.start("up", "--port", str(port), "--no-live")
    try:
        record = wait_for(lambda: runner.status() and _record(state), 120, lambda: proc.poll())
        project = record["project_id"]
        files = {"slow.py": "SLOW = True\n", "test_slow.py": SLOW_TEST}
        text = plan_description("Add a slow test.", files, "Add a slow test")
        task = file_task(state, project, "Add a slow test", ["the test exists"], text)

        def running() -> dict[str, Any] | None:
            assert proc.poll() is None, proc.communicate()[0]
            found = [x for x in _launches(state) if x["role"] == "implementer" and x["pid"]]
            return found[0] if found else None

        launch = wait_for(running, 300, lambda: _logs(state))
        killed = int(_record(state)["children"]["supervisor"])
        os.kill(killed, signal.SIGKILL)

        def landed() -> dict[str, Any] | None:
            assert proc.poll() is None, proc.communicate()[0]
            view = _task(state, project, task)
            return view if view["work_status"] == "done" else None

        view = wait_for(landed, 300, lambda: _logs(state))
        assert _restarted(state, "supervisor", killed)
        supervisor_log = (state / "logs/supervisor.log").read_text()
        assert f"settled launch {launch['launch_id']} (task {task})" in supervisor_log
        # No lease left held: the killed launch's attempt was let go, the second one landed.
        attempts = view["attempts"]
        assert len(attempts) >= 2 and not [a for a in attempts if a["state"] == "active"]
        assert launch["attempt"] in {a["id"] for a in attempts}
        # No launch left running: the loop settled every record it had.
        wait_for(lambda: not _launches(state), 60, lambda: _launches(state))

        # The egress proxy, the integrator and the coordinator, each killed, each started
        # again; the system answers again afterwards.
        for name in ("egress", "integrator", "coordinator"):
            old = int(_record(state)["children"][name])
            os.kill(old, signal.SIGKILL)
            wait_for(lambda n=name, o=old: _restarted(state, n, o), 60, lambda: _logs(state))
        wait_for(lambda: runner.status(), 120, lambda: _logs(state))

        # A coordinator that exits at once (another program took its port) is given up on.
        old = int(_record(state)["children"]["coordinator"])
        os.kill(old, signal.SIGKILL)
        with _take_port(port):
            try:
                out, _ = proc.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{stop(proc)}\n{_logs(state)}") from None
    finally:
        if proc.poll() is None:
            stop(proc)
    assert proc.returncode == 1, out
    assert "the supervisor exited (-9)" in out, out
    assert "restarted supervisor (restart 1, it exited -9)" in out, out
    for name in ("egress", "integrator"):
        assert f"restarted {name} (restart 1" in out, out
    given_up = r"the coordinator exited \(\d+\) 4 times in a row, each within 30 s of its start"
    assert re.search(given_up, out), out
    assert "agentc: stopping everything" in out, out
    # Stopped cleanly: nothing of the tree runs, and the state is kept for the next up.
    wait_for(lambda: not processes_of(entry.pw_uid), 30, lambda: processes_of(entry.pw_uid))
    assert "pid" not in _record(state)


class _take_port:
    """A listener on the coordinator's loopback port, bound as soon as the killed coordinator
    let it go (well inside up's first backoff of one second)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sock.bind(("127.0.0.1", port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        self.sock.listen(1)

    def __enter__(self) -> _take_port:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
