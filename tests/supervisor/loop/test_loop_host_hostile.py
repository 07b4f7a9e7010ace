"""Host mode's loop with a hostile ``command:`` implementer (tests/kit/hostile_agent.py), as
the implementer account: the role's credential never enters the launch, and the attempt
credential it holds does nothing beyond its attempt and nothing once the launch ended. The
same agent runs through ``agentc up`` in tests/up/test_up_hostile_agent.py (personal mode)."""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Any

import httpx
import pytest

from tests.client.kit import issue_token
from tests.kit import hostile
from tests.supervisor.loop.host_kit import HostLoop
from tests.supervisor.loop.kit import agent_run

pytestmark = pytest.mark.root


def _post(client: httpx.Client, path: str, body: Any) -> Any:
    answer = client.post(path, json=body, headers={"Idempotency-Key": str(uuid.uuid4())})
    assert answer.status_code < 300, answer.text
    return answer.json()["data"]


def test_a_hostile_implementer_holds_only_its_attempt(host: HostLoop) -> None:
    loop = host.loop
    program = host.root / "agent" / "hostile.py"
    shutil.copyfile(hostile.HOSTILE_AGENT, program)
    os.chmod(program, 0o755)  # noqa: S103 - the implementer account runs it
    loop.run = agent_run(program, launches=1)  # the task left on offer stays on offer
    loop.write_config()
    base = f"/api/v1/projects/{loop.project}"
    # Another agent holds a task of the project (its own credential and session).
    victim_token = issue_token(loop.admin, f"victim-{uuid.uuid4().hex[:6]}", loop.project)
    with httpx.Client(
        base_url=loop.live.url, timeout=30, headers={"Authorization": f"Bearer {victim_token}"}
    ) as victim:
        opened = _post(victim, "/api/v1/sessions", {"harness": "victim"})
        victim.headers["X-Coordinator-Session"] = opened["session_id"]
        victim.headers["X-Coordinator-Session-Proof"] = opened["proof"]
        victim_task = loop.task("the victim's task")
        claim = {"task_id": victim_task["id"], "expected_task_revision": victim_task["revision"]}
        claimed = _post(victim, f"{base}/claims", claim)
    victim_attempt = claimed["claim"]["attempt"]
    ready = loop.task("on offer")
    probes = [
        str(host.credential),
        str(host.reviewer_credential),
        str(loop.state / "loop/client/credentials.toml"),
    ]
    plan = {
        "victim_task": victim_task["id"],
        "victim_attempt": victim_attempt["id"],
        "victim_generation": victim_attempt["generation"],
        "ready_task": ready["id"],
        "probes": probes,
    }
    body = {
        "title": "hostile",
        "description": hostile.description(plan),
        "acceptance_criteria": ["x"],
        "priority": 0,
    }
    _post(loop.admin, f"{base}/tasks", body)

    result = loop.once()
    assert result.returncode == 0, result.stderr
    events = hostile.kept_events(loop.state / "loop")
    assert events is not None, result.stderr + loop.tails()
    tries, token = hostile.printed(events)
    hostile.check_refused(tries, probes)
    hostile.check_dead(loop.live.url, loop.project, token)
    assert loop.attempt(victim_attempt["id"])["attempt"]["state"] == "active"
    assert loop.show(ready["id"])["work_status"] == "ready"
    listed = loop.admin.get(f"{base}/tasks?limit=100").json()["data"]["items"]
    assert "relaunch me" not in [t["title"] for t in listed]
    # The role's credential is not in anything the launch was given: its run is gone, and the
    # kept log of the launch holds the attempt credential only.
    role_token = host.credential.read_text().split('token = "')[1].split('"')[0]
    assert role_token not in events.read_text() and token["token"] != role_token
