"""``agentc up`` with a hostile ``command:`` agent, as a throwaway unprivileged user: from inside
its launch the agent tries what a launch holding a coordinator credential could abuse (reading
the role credentials, opening its own session, claiming another task, releasing another agent's
attempt with a poisoned handoff, filing a task for the loop to launch, charging another attempt
or no attempt, publishing its credential through the push helper), and each is refused; the
credential it held is refused once its launch ended. docs/security.md, "What a launch can do"."""

from __future__ import annotations

import os
import pwd
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kit import hostile
from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, admin_client, free_port, stop, wait_for

pytestmark = pytest.mark.root


@pytest.fixture
def user() -> Iterator[str]:
    name = create_user("agentc-h")
    try:
        yield name
    finally:
        delete_user(name)


class Admin:
    """The console's admin over the API, with the password ``up`` wrote."""

    def __init__(self, state: Path) -> None:
        self.client = admin_client(state)  # signed in at the console's own name

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
        answer = self.client.post(
            path, json=body, headers={"Idempotency-Key": str(uuid.uuid4()), **(headers or {})}
        )
        assert answer.status_code < 300, answer.text
        return answer.json()["data"]

    def get(self, path: str) -> Any:
        answer = self.client.get(path)
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]

    def close(self) -> None:
        self.client.close()


def _victim(admin: Admin, url: str, project: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Another agent (its own credential and session) holding a task of the project: the task
    and its attempt. The loop may take a new task first; then another is filed."""
    issued = admin.post(
        "/api/v1/admin/agents",
        {"name": f"victim-{uuid.uuid4().hex[:6]}", "projects": [project]},
    )
    with httpx.Client(
        base_url=url, timeout=30, headers={"Authorization": f"Bearer {issued['token']}"}
    ) as victim:
        return _claim_one(admin, victim, project)


def _claim_one(
    admin: Admin, victim: httpx.Client, project: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    opened = victim.post(
        "/api/v1/sessions", json={"harness": "victim"}, headers={"Idempotency-Key": "s"}
    ).json()["data"]
    victim.headers.update(
        {"X-Coordinator-Session": opened["session_id"],
         "X-Coordinator-Session-Proof": opened["proof"]}
    )  # fmt: skip
    for _ in range(10):
        task = admin.post(
            f"/api/v1/projects/{project}/tasks",
            {"title": "the victim's task", "acceptance_criteria": ["done"], "priority": 3},
        )["task"]
        claimed = victim.post(
            f"/api/v1/projects/{project}/claims",
            json={"task_id": task["id"], "expected_task_revision": task["revision"]},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        if claimed.status_code == 201:
            attempt: dict[str, Any] = claimed.json()["data"]["claim"]["attempt"]
            return task, attempt
    raise AssertionError("the loop took every victim task first")


def _log(state: Path) -> str:
    lines = (state / "logs/supervisor.log").read_text().splitlines()
    return "\n".join(line for line in lines if not line.endswith(": Idle"))[-4000:]


def test_a_hostile_agent_holds_only_its_attempt(user: str) -> None:
    entry = pwd.getpwnam(user)
    work = Path(entry.pw_dir) / "hostile"
    work.mkdir()
    os.chown(work, entry.pw_uid, entry.pw_gid)
    runner = Runner(work, user)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    state = work / ".agentc"
    harness = f"command:{hostile.HOSTILE_AGENT}"
    proc = runner.start("up", "--harness", harness, "--port", str(port), "--no-live")
    admins: list[Admin] = []
    try:
        record = wait_for(
            lambda: (state / "up.json").exists() and runner.status(),
            180,
            lambda: proc.poll(),
        )
        project = record["project_id"]
        admin = Admin(state)
        admins.append(admin)
        victim_task, victim_attempt = _victim(admin, url, project)
        probes = [
            str(state / "credentials/implementer.toml"),
            str(state / "credentials/reviewer.toml"),
            str(state / "credentials/integrator.token"),
            str(state / "admin-password"),
            str(state / "coordinator.sqlite3"),
        ]
        plan = {
            "victim_task": victim_task["id"],
            "victim_attempt": victim_attempt["id"],
            "victim_generation": victim_attempt["generation"],
            "ready_task": "",
            "probes": probes,
        }
        # The ready task goes on offer right after the hostile one, which is urgent.
        hostile_task = admin.post(
            f"/api/v1/projects/{project}/tasks",
            {"title": "hostile", "description": "filled below", "acceptance_criteria": ["x"],
             "priority": 0, "planned": True},
        )["task"]  # fmt: skip
        ready = admin.post(
            f"/api/v1/projects/{project}/tasks",
            {"title": "on offer", "acceptance_criteria": ["x"], "priority": 3, "planned": True},
        )["task"]
        plan["ready_task"] = ready["id"]
        for task, fields in (
            (hostile_task, {"description": hostile.description(plan), "planned": False}),
            (ready, {"planned": False}),
        ):
            answer = admin.client.patch(
                f"/api/v1/projects/{project}/tasks/{task['id']}",
                json={"expected_revision": task["revision"], **fields},
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )
            assert answer.status_code == 200, answer.text
        events = wait_for(
            lambda: hostile.kept_events(state / "supervisor/loop"),
            300,
            lambda: _log(state),
        )
        tries, token = hostile.printed(events)
        hostile.check_refused(tries, probes)
        # Its attempt is released (the launch ended without submitting): the credential is dead.
        hostile.check_dead(url, project, token)
        # Nothing it tried took effect: the victim still holds its task, no task was filed.
        victim = admin.get(f"/api/v1/projects/{project}/attempts/{victim_attempt['id']}")
        assert victim["attempt"]["state"] == "active", victim
        titles = [
            t["title"] for t in admin.get(f"/api/v1/projects/{project}/tasks?limit=100")["items"]
        ]
        assert "relaunch me" not in titles, titles
        costs = admin.get(f"/api/v1/projects/{project}/attention")
        assert "5000" not in str(costs), costs
    finally:
        for admin in admins:
            admin.close()
        out = stop(proc)
    assert proc.returncode == 0, out
