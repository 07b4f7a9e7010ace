"""Running ``agentc up`` and ``agentc status`` as real processes, as root or as a throwaway
unprivileged user (the system Python with this checkout's packages on PYTHONPATH: a user cannot
run an interpreter under root's home)."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import time
import uuid
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.kit.live import admin_at
from tests.kit.pg import free_port
from tests.supervisor.kit import REPO, VENV_SITE

PYTHON = "/usr/bin/python3"


@dataclass
class Runner:
    """``agentc`` commands in ``workdir``, as ``user`` (None: as this process's user)."""

    workdir: Path
    user: str | None = None

    def env(self) -> dict[str, str]:
        home = pwd.getpwnam(self.user).pw_dir if self.user else str(self.workdir)
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": home,
            "PYTHONPATH": f"{VENV_SITE}:{REPO / 'src'}",
        }

    def argv(self, *args: str) -> list[str]:
        prefix: list[str] = []
        if self.user:
            entry = pwd.getpwnam(self.user)
            prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}"]
            prefix.append("--clear-groups")
        return [*prefix, PYTHON, "-m", "agentc.up.cli", *args]

    def run(
        self, *args: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=self.workdir,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.workdir,
            env=env or self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def status(self, env: dict[str, str] | None = None) -> dict[str, Any] | None:
        done = self.run("status", "--json", timeout=60, env=env)
        if done.returncode != 0:
            return None
        data: dict[str, Any] = json.loads(done.stdout)
        return data


def all_started(snap: dict[str, Any] | None) -> dict[str, Any] | None:
    """A status that lists every process ``up`` starts, else None: while ``up`` starts its
    children, ``status`` names only ``up`` itself (a previous run's children are not shown)."""
    return snap if snap and "supervisor" in snap["processes"] else None


def stop(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    """Ctrl-C (SIGINT), then the output."""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=timeout)
    return out


def wait_for(check: Any, timeout: float, why: Any) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out: {why() if callable(why) else why}")


def processes_of(uid: int) -> list[str]:
    """The processes ``uid`` runs (pid and command); exited ones not yet reaped are not counted."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            # An exited process nobody has reaped yet runs nothing: the test process itself is
            # a child subreaper once an in-process test ran a setup command (loop/setup.py), so
            # what a throwaway user's programs orphan is left to it as a zombie.
            continue
        found.append(f"{entry.name} {cmd.strip()}")
    return found


def console_of(state: Path) -> str:
    """The console's origin ``up`` keeps in its record (its own name, on the coordinator's
    port)."""
    console: str = json.loads((state / "up.json").read_text())["console"]
    return console


def admin_client(state: Path) -> httpx.Client:
    """``up``'s admin (its password from the state directory), signed in at the console's own
    name (tests.kit.live.admin_at)."""
    console = console_of(state)
    url = f"http://127.0.0.1:{urlsplit(console).port}"
    return admin_at(url, console, (state / "admin-password").read_text().strip())


def file_task(
    state: Path, project: str, title: str, criteria: list[str], description: str = ""
) -> str:
    """A task filed by ``up``'s admin; its id."""
    body: dict[str, Any] = {"title": title, "acceptance_criteria": criteria}
    if description:
        body["description"] = description
    with closing(admin_client(state)) as admin:
        made = admin.post(
            f"/api/v1/projects/{project}/tasks",
            json=body,
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert made.status_code == 201, made.text
        task_id: str = made.json()["data"]["task"]["id"]
        return task_id


def git_log(repo: Path, ref: str = "main") -> list[str]:
    out = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(repo), "log", "--format=%s", ref],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"},
    ).stdout
    return out.splitlines()


__all__ = [
    "admin_client",
    "console_of",
    "file_task",
    "free_port",
    "git_log",
    "processes_of",
    "stop",
    "wait_for",
    "Runner",
]
