"""``agentc up --seed-demo`` end to end as an unprivileged user in a fresh directory: the
coordinator, the supervisor loop (implementer and reviewer launches of the bundled example
agent in the full sandbox), the candidate push helper and the integrator land all three demo
tasks on the sample repository's main branch; Ctrl-C leaves nothing running; a second ``up``
resumes with the same state."""

from __future__ import annotations

import os
import pwd
import re
import socket
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentc.egress.egress_policy import launch_line
from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, free_port, git_log, processes_of, stop, wait_for

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def user() -> Iterator[str]:
    name = create_user("agentc-d")
    try:
        yield name
    finally:
        delete_user(name)


def test_seed_demo_lands_three_tasks_then_stops_and_resumes(user: str) -> None:
    entry = pwd.getpwnam(user)
    work = Path(entry.pw_dir) / "demo"
    work.mkdir()
    os.chown(work, entry.pw_uid, entry.pw_gid)
    runner = Runner(work, user)
    port = str(free_port())
    proc = runner.start("up", "--seed-demo", "--port", port, "--no-live")
    state = work / ".agentc"
    try:

        def landed() -> dict[str, object] | None:
            if proc.poll() is not None:
                raise AssertionError(f"agentc up exited: {proc.communicate()[0]}")
            snap = runner.status()
            return snap if snap and snap["tasks"]["done"] == 3 else None

        def why() -> str:
            logs = sorted((state / "logs").glob("*.log")) if state.exists() else []
            return "\n".join(f"{p.name}:\n{p.read_text()[-3000:]}" for p in logs)

        snap = wait_for(landed, 420, why)
        assert snap["processes"]["egress"]["running"], snap["processes"]
        _egress_refuses(state)
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    # The console at its own name (the one in the record), on the coordinator's port.
    console = re.search(r"agentc is up: console (\S+)/console", out)
    assert console and re.fullmatch(
        rf"http://agentc-[0-9a-f]{{32}}\.localhost:{port}", console.group(1)
    ), out
    assert snap["console"] == console.group(1) + "/console"
    assert "stopped; `agentc up` again resumes" in out
    assert {k: v for k, v in snap["tasks"].items() if v} == {"done": 3}
    subjects = git_log(state / "remote.git")
    # Each landing is the integrator's own commit, titled with its task's title.
    titles = {"Add subtract to calc", "Add multiply to calc", "Start a changelog"}
    assert titles <= set(subjects), subjects
    assert subjects[-1] == "calc: a tiny sample project"
    # Nothing of the tree is left: no process of the user runs.
    wait_for(lambda: not processes_of(entry.pw_uid), 30, lambda: processes_of(entry.pw_uid))
    for sub in ("supervisor/impl/runs", "supervisor/impl/clones", "supervisor/rev/runs"):
        assert list((state / sub).iterdir()) == [], sub
    mode = os.stat(state / "admin-password").st_mode & 0o777
    assert mode == 0o600
    # After up: status starts a coordinator briefly and reads the same state.
    after = runner.status()
    assert after is not None and after["tasks"]["done"] == 3
    assert after["project_id"] == snap["project_id"]
    # A second up resumes: same project, no new tasks, the demo is not filed twice; a state
    # directory opened up meanwhile (an earlier version's 0755) is made private again.
    os.chmod(state, 0o755)  # noqa: S103 - what the resumed up must undo
    again = runner.start("up", "--seed-demo", "--port", port, "--no-live")

    def resumed_up() -> dict[str, Any] | None:
        assert again.poll() is None, again.communicate()[0]
        snap = runner.status()
        # The resumed up's own answer: until that up has started, `status` answers too, from a
        # coordinator of its own on the same state (and the up may not have run at all yet).
        return snap if snap and snap["processes"]["up"]["running"] else None

    try:
        resumed = wait_for(resumed_up, 120, why)
        assert os.stat(state).st_mode & 0o7777 == 0o700
    finally:
        out = stop(again)
    assert again.returncode == 0, out
    assert resumed["project_id"] == snap["project_id"]
    assert sum(resumed["tasks"].values()) == 3 and resumed["tasks"]["done"] == 3
    wait_for(lambda: not processes_of(entry.pw_uid), 30, lambda: processes_of(entry.pw_uid))


def _egress_refuses(state: Path) -> None:
    """The egress proxy ``up`` runs for the launches answers with its policy on its Unix socket
    (to a connection naming a launch, as a relay's does): an IP literal and an unlisted name are
    refused before anything is resolved or connected."""
    config = tomllib.loads((state / "supervisor.toml").read_text())
    assert config["egress_listen"] == "127.0.0.1:3128"  # inside each launch's own namespace
    for target in ("127.0.0.1:443", "unlisted.example:443"):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(10)
            conn.connect(config["egress_socket"])
            conn.sendall(launch_line(str(uuid.uuid4())))
            conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            answer = conn.recv(200).decode("latin-1")
        assert answer.startswith("HTTP/1.1 403"), (target, answer)
