"""Test kit for agentc-attention: loopback page receivers (ntfy-compatible and webhook, real
HTTP), a live coordinator project with a designated digest sender, and the CLI as a
subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.kit.live import LiveServer

ATTENTION = str(Path(sys.executable).with_name("agentc-attention"))


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """An HTTP server on loopback that records every POST and answers ``status``."""

    server: ThreadingHTTPServer
    got: list[Received] = field(default_factory=list)
    status: int = 200

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def titles(self) -> list[str]:
        return [r.headers.get("Title", "") for r in self.got]


@contextmanager
def receiver() -> Iterator[Receiver]:
    holder: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            rec = holder[0]
            if rec.status == 200:
                rec.got.append(Received(self.path, dict(self.headers.items()), body))
            self.send_response(rec.status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec = Receiver(server)
    holder.append(rec)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()


def private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@dataclass
class Setup:
    """A project on a live coordinator whose digest sender is the attention agent."""

    server: LiveServer
    project_id: str
    token_file: Path
    root: Path

    def config(self, **sections: dict[str, Any]) -> Path:
        lines = [
            f'origin = "{self.server.url}"',
            f'project_id = "{self.project_id}"',
            f'token_file = "{self.token_file}"',
            "allow_insecure_loopback = true",
            f'state_dir = "{self.root / "state"}"',
        ]
        for name, values in sections.items():
            lines.append(f"[{name}]")
            lines += [
                f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}"
                for k, v in values.items()
            ]
        path = self.root / "attention.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def beat(self, path: Path | None = None, **data: Any) -> Path:
        """A fresh supervisor heartbeat, as the loop writes it."""
        path = path or self.root / "heartbeat.json"
        body = {"pid": os.getpid(), "at_ms": time.time_ns() // 1_000_000, "iteration": 1}
        path.write_text(json.dumps({**body, **data}))
        return path


@contextmanager
def admin(server: LiveServer) -> Iterator[httpx.Client]:
    """The admin signed in at the console (closed at the end)."""
    client = server.admin_client()
    try:
        yield client
    finally:
        client.close()


def set_up(server: LiveServer, root: Path, *, designate: bool = True) -> Setup:
    name = f"p-{os.urandom(4).hex()}"
    with admin(server) as person:
        resp = person.post(
            "/api/v1/projects",
            json={"name": name, "repository_url": "https://github.com/example/repo"},
            headers={"Idempotency-Key": os.urandom(8).hex()},
        )
    resp.raise_for_status()
    pid = resp.json()["data"]["id"]
    token = server.issue_token("attention-bot", pid, credential_class="supervised", access="read")
    if designate:
        out = server.cli("designate-digest-sender", "--project", pid, "--agent", "attention-bot")
        assert out.returncode == 0, out.stderr
    return Setup(server, pid, private(root / "token", token + "\n"), root)


def attention(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATTENTION, "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
    )


def _key() -> dict[str, str]:
    return {"Idempotency-Key": os.urandom(8).hex()}


def new_task(server: LiveServer, project_id: str, title: str, **fields: Any) -> dict[str, Any]:
    """A task the admin files."""
    with admin(server) as person:
        resp = person.post(
            f"/api/v1/projects/{project_id}/tasks",
            json={"title": title, "acceptance_criteria": ["ok"], **fields},
            headers=_key(),
        )
    assert resp.status_code == 201, resp.text
    task: dict[str, Any] = resp.json()["data"]["task"]
    return task


@contextmanager
def claimed(
    server: LiveServer, project_id: str, task: dict[str, Any]
) -> Iterator[tuple[httpx.Client, dict[str, Any]]]:
    """A new agent's session holding an attempt of the task: (its client, the attempt)."""
    token = server.issue_token(f"worker-{os.urandom(3).hex()}", project_id)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as agent:
        session = agent.post("/api/v1/sessions", json={"harness": "test"}, headers=_key())
        data = session.json()["data"]
        agent.headers["X-Coordinator-Session"] = data["session_id"]
        agent.headers["X-Coordinator-Session-Proof"] = data["proof"]
        resp = agent.post(
            f"/api/v1/projects/{project_id}/claims",
            json={"task_id": task["id"], "expected_task_revision": task["revision"]},
            headers=_key(),
        )
        assert resp.status_code in (200, 201), resp.text
        yield agent, resp.json()["data"]["claim"]["attempt"]


def set_review_mode(server: LiveServer, project_id: str, mode: str) -> None:
    with admin(server) as person:
        view = person.get(f"/api/v1/projects/{project_id}").json()["data"]
        body = {"review_mode": mode, "expected_revision": view["policy"]["revision"]}
        resp = person.patch(f"/api/v1/projects/{project_id}/policy", json=body, headers=_key())
    assert resp.status_code == 200, resp.text


def submit_code(
    agent: httpx.Client, project_id: str, task: dict[str, Any], attempt: dict[str, Any]
) -> dict[str, Any]:
    resp = agent.post(
        f"/api/v1/projects/{project_id}/attempts/{attempt['id']}/submissions",
        json={
            "generation": attempt["generation"],
            "kind": "code",
            "summary": "done",
            "acceptance_evidence": [
                {"criterion": c, "evidence": "checked"} for c in task["acceptance_criteria"]
            ],
            "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/s1",
            "candidate_revision": "a" * 40,
            "base_revision": "b" * 40,
        },
        headers=_key(),
    )
    assert resp.status_code == 201, resp.text
    data: dict[str, Any] = resp.json()["data"]
    return data


def land(server: LiveServer, project_id: str, task: dict[str, Any], integrator: str) -> None:
    """The pipeline by hand: an agent claims and submits the task (no review), the integrator
    records its landing; the task is done."""
    with claimed(server, project_id, task) as (agent, attempt):
        sub = submit_code(agent, project_id, task, attempt)
    activity = next(a for a in sub["activities"] if a["kind"] == "integration")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {integrator}"}) as it:
        resp = it.post(
            f"/api/v1/projects/{project_id}/workflow-activities/{activity['id']}/landing",
            json={"submission_id": sub["submission"]["id"], "landed_revision": "c" * 40},
            headers=_key(),
        )
    assert resp.status_code in (200, 201), resp.text


def ready_tasks(server: LiveServer, project_id: str, token: str) -> list[dict[str, Any]]:
    resp = httpx.get(
        f"{server.url}/api/v1/projects/{project_id}/tasks?work_status=ready",
        headers={"Authorization": f"Bearer {token}"},
    )
    items: list[dict[str, Any]] = resp.json()["data"]["items"]
    return items
