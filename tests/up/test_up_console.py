"""``agentc up`` serves the console at a name of its own (``http://agentc-<random>.localhost:PORT``)
that no other local user can learn: not from the process list, not from the coordinator at
127.0.0.1. The name is kept while the port is; a new port makes a new one; every start ends the
browser sessions of the last (a program may have taken the port meanwhile)."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, admin_client, free_port, processes_of, stop, wait_for

pytestmark = pytest.mark.root
NAME = re.compile(r"http://(agentc-[0-9a-f]{32})\.localhost:([0-9]+)")


@pytest.fixture
def users() -> Iterator[tuple[str, str]]:
    """The person running ``up``, and another user of the machine."""
    first, second = create_user("agentc-c"), create_user("agentc-o")
    try:
        yield first, second
    finally:
        delete_user(first)
        delete_user(second)


def _record(state: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((state / "up.json").read_text())
    return data


def _up(runner: Runner, state: Path, port: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = runner.start("up", "--port", str(port), "--no-live")

    def running() -> dict[str, Any] | None:
        assert proc.poll() is None, proc.communicate()[0]
        if not (state / "up.json").exists() or _record(state).get("pid") != proc.pid:
            return None  # (setpriv runs agentc up in its own process)
        return runner.status() if "children" in _record(state) else None

    return proc, wait_for(running, 180, "agentc up did not start")


def _as(user: str, *argv: str) -> subprocess.CompletedProcess[str]:
    entry = pwd.getpwnam(user)
    prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=60)


def test_the_console_has_a_name_of_its_own_that_other_users_cannot_learn(
    users: tuple[str, str],
) -> None:
    person, other = users
    entry = pwd.getpwnam(person)
    work = Path(entry.pw_dir) / "console"
    work.mkdir()
    os.chown(work, entry.pw_uid, entry.pw_gid)
    runner, state, port = Runner(work, person), work / ".agentc", free_port()
    proc, snap = _up(runner, state, port)
    try:
        console = str(_record(state)["console"])
        found = NAME.fullmatch(console)
        assert found and found.group(2) == str(port), console
        label = found.group(1)
        assert snap["console"] == console + "/console"
        # The process list every user reads never shows the name...
        listed = processes_of(entry.pw_uid)
        assert any("agentc.service.cli" in p for p in listed), listed
        assert not any(label in p for p in listed), listed
        # ...and the coordinator's environment, which holds it, is its owner's alone.
        coordinator = next(p.split()[0] for p in listed if "agentc.service.cli" in p)
        peek = _as(other, "cat", f"/proc/{coordinator}/environ")
        assert peek.returncode != 0 and label not in peek.stdout
        # At 127.0.0.1 the coordinator names it nowhere and signs nobody in.
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as program:
            for path in ("/console/projects", "/console/sign-in", "/api/v1/info", "/healthz"):
                resp = program.get(path)
                assert label not in resp.text + str(resp.headers), path
            login = program.post(
                "/api/v1/auth/login",
                json={"username": "admin", "password": (state / "admin-password").read_text()},
                headers={"Origin": console},
            )
            assert login.status_code == 421 and "set-cookie" not in login.headers
        # At its own name the admin signs in.
        with closing(admin_client(state)) as admin:
            assert admin.get("/api/v1/me").json()["data"]["actor"]["name"] == "admin"
            cookie = admin.cookies["coordinator_local"]
    finally:
        out = stop(proc)
    assert f"agentc is up: console {console}/console" in out, out
    # Started again on the same port: the same name, and the last run's sessions are gone.
    proc, _snap = _up(runner, state, port)
    try:
        assert _record(state)["console"] == console
        with closing(admin_client(state)) as admin:
            admin.cookies.clear()
            admin.cookies.set("coordinator_local", cookie)
            admin.headers.pop("X-CSRF-Token")
            assert admin.get("/api/v1/me").status_code == 401
    finally:
        stop(proc)
    # On another port: a new name (a browser still visiting the old one reaches the old port).
    moved = free_port()
    proc, snap = _up(runner, state, moved)
    try:
        renamed = str(_record(state)["console"])
        assert renamed != console and NAME.fullmatch(renamed)
        assert renamed.endswith(f":{moved}") and snap["console"] == renamed + "/console"
    finally:
        stop(proc)
    wait_for(lambda: not processes_of(entry.pw_uid), 30, lambda: processes_of(entry.pw_uid))
