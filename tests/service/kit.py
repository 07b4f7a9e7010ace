"""Test kit for the coordinator API: a service over a real database, humans and agents."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
from starlette.testclient import TestClient

from agentc.service.app import create_app
from agentc.service.settings import ServerSettings
from agentc.service.work.accounts import create_admin
from agentc.store.engine import Database, migrate, open_engine
from agentc.store.tx import Executor
from tests.kit.faketime import faketime_env

ORIGIN = "http://127.0.0.1:8080"
SERVER = str(Path(sys.executable).with_name("agent-coordinator-server"))
ADMIN_PASSWORD = "correct horse battery staple"


class Clock:
    """Service time the test moves by hand (ms since the epoch)."""

    def __init__(self, start: int = 1_800_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {body}")
        self.status = status
        self.body = body
        self.code = body.get("error", {}).get("code")


@dataclass
class Caller:
    """One caller's credentials; every mutation gets a fresh Idempotency-Key unless given."""

    client: TestClient
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    issued: dict[str, Any] = field(default_factory=dict)  # an agent's credential, as issued

    def raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx2.Response:
        h = dict(self.headers)
        if method != "GET":
            h["Idempotency-Key"] = key or str(uuid.uuid4())
        h.update(headers or {})
        self.client.cookies.clear()
        for k, v in self.cookies.items():
            self.client.cookies.set(k, v)
        return self.client.request(method, path, json=body, headers=h)

    def call(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        resp = self.raw(method, path, body, key)
        payload = resp.json()
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, payload)
        return payload["data"]

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: Any = None, key: str | None = None) -> Any:
        return self.call("POST", path, body, key)

    def patch(self, path: str, body: Any = None) -> Any:
        return self.call("PATCH", path, body)


class Service:
    def __init__(self, database: str, clock: Clock, **settings: Any) -> None:
        self.settings = ServerSettings(
            database=database, public_origin=ORIGIN, allow_insecure_loopback=True, **settings
        )
        engine = open_engine(Database.parse(database))
        migrate(engine)
        self.executor = Executor(engine, clock)
        self.clock = clock
        self.app = create_app(self.settings, clock=clock, executor=self.executor)
        self.client = TestClient(self.app, base_url=ORIGIN)
        self.executor.write(lambda tx: create_admin(tx.conn, tx.now, "admin", ADMIN_PASSWORD))
        self.admin = self.login("admin", ADMIN_PASSWORD)

    def anonymous(self) -> Caller:
        return Caller(self.client)

    def login(self, username: str, password: str) -> Caller:
        resp = self.client.post(
            "/api/v1/auth/login",
            json={"username": username, "password": password},
            headers={"Origin": ORIGIN},
        )
        assert resp.status_code == 200, resp.text
        cookie = resp.cookies["coordinator_local"]
        csrf = resp.json()["data"]["csrf_token"]
        return Caller(
            self.client, {"Origin": ORIGIN, "X-CSRF-Token": csrf}, {"coordinator_local": cookie}
        )

    def agent(
        self,
        *projects: str,
        name: str | None = None,
        credential_class: str = "interactive",
        access: str = "write",
        session: bool = True,
    ) -> Caller:
        """A new credential (of a new agent unless name is given) granted the projects."""
        name = name or f"agent-{uuid.uuid4().hex[:8]}"
        data = self.admin.post(
            "/api/v1/admin/agents",
            {
                "name": name,
                "credential_class": credential_class,
                "access": access,
                "projects": list(projects),
            },
        )
        caller = Caller(self.client, {"Authorization": f"Bearer {data['token']}"}, issued=data)
        if session:
            s = caller.post("/api/v1/sessions", {"harness": "test"})
            caller.headers["X-Coordinator-Session"] = s["session_id"]
            caller.headers["X-Coordinator-Session-Proof"] = s["proof"]
        return caller

    def person(
        self, *projects: str, role: str = "operator", project_role: str = "operator"
    ) -> Caller:
        """A new person (signed in) granted the projects with project_role."""
        name = f"person-{uuid.uuid4().hex[:8]}"
        body = {"name": name, "role": role, "password": ADMIN_PASSWORD}
        pid = self.admin.post("/api/v1/admin/people", body)["id"]
        for project in projects:
            self.admin.post(
                f"/api/v1/admin/principals/{pid}/projects",
                {"project_id": project, "role": project_role},
            )
        return self.login(name, ADMIN_PASSWORD)

    def grant(self, caller: Caller, project_id: str, role: str | None = None) -> None:
        """The admin grants the caller's principal the project."""
        principal = caller.get("/api/v1/me")["actor"]["id"]
        body = (
            {"project_id": project_id} if role is None else {"project_id": project_id, "role": role}
        )
        self.admin.post(f"/api/v1/admin/principals/{principal}/projects", body)

    def project(self, **policy: Any) -> str:
        body = {
            "name": f"p-{uuid.uuid4().hex[:8]}",
            "repository_url": "https://github.com/example/repo",
            **policy,
        }
        project_id: str = self.admin.post("/api/v1/projects", body)["id"]
        return project_id

    def task(self, project_id: str, caller: Caller | None = None, **fields: Any) -> dict[str, Any]:
        body = {"title": "a task", "acceptance_criteria": ["it works"], **fields}
        task: dict[str, Any] = (caller or self.admin).post(
            f"/api/v1/projects/{project_id}/tasks", body
        )["task"]
        return task

    def host(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """``agent-coordinator-server --database <this service's> ARGS``: a host command on the
        service's clock. In production both read the host's clock; a host command on the real
        clock, behind this kit's, would wait for the service's high-water mark
        (agentc.store.clock). libfaketime starts the command's wall clock at the kit clock's
        time."""
        start = datetime.fromtimestamp(self.clock.now / 1000, UTC)
        env = faketime_env(start.strftime("@%Y-%m-%d %H:%M:%S"))
        command = [SERVER, "--database", self.settings.database, *args]
        return subprocess.run(
            command, input=stdin, capture_output=True, text=True, env=env, timeout=120
        )

    def close(self) -> None:
        self.client.close()
        self.executor.close()


@contextmanager
def running(database: str, clock: Clock | None = None, **settings: Any) -> Iterator[Service]:
    svc = Service(database, clock or Clock(), **settings)
    try:
        yield svc
    finally:
        svc.close()


def claim(agent: Caller, project_id: str, task: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = agent.post(
        f"/api/v1/projects/{project_id}/claims",
        {"task_id": task["id"], "expected_task_revision": task["revision"]},
    )
    return data


def submit_general(
    agent: Caller,
    project_id: str,
    attempt: dict[str, Any],
    criteria: tuple[str, ...] = ("it works",),
) -> dict[str, Any]:
    """Submit a general task's attempt with evidence for each criterion."""
    return _submit(agent, project_id, attempt, {"kind": "general"}, criteria)


def submit_code(
    agent: Caller,
    project_id: str,
    attempt: dict[str, Any],
    criteria: tuple[str, ...] = ("it works",),
) -> dict[str, Any]:
    """Submit a code task's attempt (candidate SHA_A on base SHA_B) with evidence."""
    git = {
        "kind": "code",
        "candidate_ref": f"refs/agent-coordinator/candidates/{attempt['task_id']}/s1",
        "candidate_revision": SHA_A,
        "base_revision": SHA_B,
    }
    return _submit(agent, project_id, attempt, git, criteria)


def _submit(
    agent: Caller,
    project_id: str,
    attempt: dict[str, Any],
    fields: dict[str, str],
    criteria: tuple[str, ...],
) -> dict[str, Any]:
    data: dict[str, Any] = agent.post(
        f"/api/v1/projects/{project_id}/attempts/{attempt['id']}/submissions",
        {
            "generation": attempt["generation"],
            "summary": "s",
            "acceptance_evidence": evidence(list(criteria)),
            **fields,
        },
    )
    return data


def evidence(criteria: list[str]) -> list[dict[str, str]]:
    return [{"criterion": c, "evidence": f"checked: {c}"} for c in criteria]


SHA_A = "a" * 40
SHA_B = "b" * 40
