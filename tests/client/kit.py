"""Test kit for the client: a workspace (git clone, binding, state, credentials), the CLI as a
real subprocess, and a loopback TCP proxy that can lose an answer on purpose."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agentc.client.reads import Workflow, shaped

BIN = Path(sys.executable).parent
CLI = str(BIN / "agent-coordinator")
MCP = str(BIN / "agent-coordinator-mcp")


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


def make_clone(root: Path) -> tuple[Path, Path]:
    """A bare 'origin' and a clone of it with one commit on main."""
    origin = root / "origin.git"
    clone = root / "clone"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(origin)], check=True)
    subprocess.run(
        ["git", "clone", "--quiet", str(origin), str(clone)], check=True, capture_output=True
    )
    git(clone, "config", "user.email", "agent@example.invalid")
    git(clone, "config", "user.name", "agent")
    git(clone, "checkout", "--quiet", "-b", "main")
    (clone / "README").write_text("hello\n")
    git(clone, "add", "README")
    git(clone, "commit", "--quiet", "-m", "first")
    git(clone, "push", "--quiet", "origin", "main")
    return origin, clone


def write_credentials(state_dir: Path, origin: str, token: str) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / "credentials.toml"
    path.write_text(f'[[credentials]]\norigin = "{origin}"\ntoken = "{token}"\n')
    path.chmod(0o600)
    return path


def admin_project(admin: httpx.Client, **policy: Any) -> str:
    body = {"name": f"p-{uuid.uuid4().hex[:8]}", "repository_url": "https://x/y", **policy}
    resp = admin.post("/api/v1/projects", json=body, headers={"Idempotency-Key": str(uuid.uuid4())})
    assert resp.status_code == 201, resp.text
    project_id: str = resp.json()["data"]["id"]
    return project_id


def issue_token(
    admin: httpx.Client, name: str, project_id: str, credential_class: str = "interactive"
) -> str:
    """A new agent credential granted the project, through the admin API (faster than the
    server CLI)."""
    body = {"name": name, "projects": [project_id], "credential_class": credential_class}
    resp = admin.post(
        "/api/v1/admin/agents", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    assert resp.status_code == 201, resp.text
    token: str = resp.json()["data"]["token"]
    return token


def admin_get(admin: httpx.Client, path: str) -> Any:
    resp = admin.get(path)
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


@dataclass
class Workspace:
    """One agent's view: a checkout bound to a project, its state dir and its token."""

    root: Path
    repo: Path
    state_dir: Path
    url: str
    project_id: str
    env: dict[str, str] = field(default_factory=dict)

    def run(
        self,
        *args: str,
        stdin: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        subprocess_: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """The CLI: in this process through `run()` (fast), or as the installed script."""
        full = {**self.base_env(), **self.env, **(env or {})}
        if subprocess_:
            return subprocess.run(
                [CLI, *args],
                input=stdin,
                capture_output=True,
                text=True,
                cwd=cwd or self.repo,
                env=full,
                timeout=120,
            )
        return run_inprocess(list(args), stdin or "", cwd or self.repo, full)

    def ok(self, *args: str, stdin: str | None = None) -> Any:
        """Run with --json and return the parsed data; the command must succeed."""
        out = self.run(*args, "--json", stdin=stdin)
        assert out.returncode == 0, (args, out.returncode, out.stdout, out.stderr)
        return json.loads(out.stdout)

    def base_env(self) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AGENT_COORDINATOR_", "COORDINATOR_"))
        }
        return {
            **keep,
            "HOME": str(self.root / "home"),
            "AGENT_COORDINATOR_STATE_DIR": str(self.state_dir),
            "AGENT_COORDINATOR_ALLOW_INSECURE_LOOPBACK": "true",
        }

    def file(self, name: str, data: Any) -> str:
        path = self.root / name
        path.write_text(json.dumps(data) if not isinstance(data, str) else data)
        return str(path)


def run_inprocess(
    args: list[str], stdin: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run `agentc.client.cli.run` with this environment, directory and stdin."""
    from agentc.client.cli import run

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    saved_in = sys.stdin
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.stdin = io.StringIO(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(args)
    finally:
        sys.stdin = saved_in
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def workspace(
    root: Path, url: str, project_id: str, token: str, repo: Path | None = None
) -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    if repo is None:
        repo = root / "repo"
        repo.mkdir()
    (repo / ".agent-coordinator.toml").write_text(
        f'service_url = "{url}"\nproject_id = "{project_id}"\n'
    )
    state = root / "state"
    write_credentials(state, url, token)
    return Workspace(root, repo, state, url, project_id)


class DroppingProxy:
    """A loopback TCP proxy. While `drop` is set, it forwards a request to the server, waits
    until the server starts answering (so the server has committed), then closes the client's
    connection without relaying a byte of the answer."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.drop = False
        self.refuse = False
        self.dropped = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopping = False
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self._stopping:
                client.close()
                return
            if self.refuse:  # the request never reaches the server
                client.close()
                continue
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self._open += [client, upstream]
            drop = self.drop
            t1 = threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True)
            t2 = threading.Thread(target=self._pump, args=(upstream, client, drop), daemon=True)
            self._threads += [t1, t2]
            t1.start()
            t2.start()

    def _pump(self, src: socket.socket, dst: socket.socket, drop: bool) -> None:
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                if drop:
                    with self._lock:
                        self.dropped += 1
                    break
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stopping = True
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
        except OSError:
            pass
        self._sock.close()
        self._accept.join(timeout=10)
        for t in self._threads:
            t.join(timeout=10)
        with self._lock:
            for s in self._open:
                s.close()


def workflow_view(
    submissions: list[dict[str, Any]] | None = None,
    reviews: list[dict[str, Any]] | None = None,
    activities: list[dict[str, Any]] | None = None,
) -> Workflow:
    """A task's workflow view as the coordinator sends it, checked by the loop's read shape:
    each submission, review and activity is given only the keys a test is about, the rest
    their empty values."""
    sub = dict.fromkeys(("attempt_id", "superseded_at", "ac_amendment"))
    sub |= dict.fromkeys(("candidate_ref", "candidate_revision", "base_revision"))
    review: dict[str, Any] = {
        "submission_id": None,
        "reviewer_kind": None,
        "summary": "",
        "findings": [],
    }
    activity = {"id": "act", "kind": "integration", "state": "completed", "submission_id": None}
    view = {
        "submission": None,
        "submissions": [{**sub, "kind": "code", **s} for s in submissions or []],
        "reviews": [{**review, **r} for r in reviews or []],
        "activities": [{**activity, **a} for a in activities or []],
    }
    return shaped(Workflow, view, "test view")
