"""The attention digest (GET /api/v1/projects/{id}/attention): what needs a human now, read by
admins and by the project's designated digest sender only."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agentc.core.errors import CoordinatorError
from agentc.core.rules import rfc3339
from agentc.service.work.attention import designate_sender
from tests.service.kit import (
    ADMIN_PASSWORD,
    ORIGIN,
    SHA_A,
    SHA_B,
    ApiError,
    Caller,
    Clock,
    Service,
    claim,
    evidence,
    running,
    submit_general,
)

DAY = 24 * 3600


@pytest.fixture
def svc(database: str, clock: Clock) -> Iterator[Service]:
    with running(
        database, clock, canary_principals=frozenset({"canary-bot"}), agent_task_weekly_budget=1
    ) as service:
        yield service


def _digest(caller: Caller, pid: str) -> dict[str, Any]:
    data: dict[str, Any] = caller.get(f"/api/v1/projects/{pid}/attention")
    return data


def _designate(svc: Service, pid: str, agent: str | None) -> str:
    return svc.executor.write(lambda tx: designate_sender(tx.conn, tx.now, pid, agent))


def _send_back(svc: Service, pid: str, worker: Caller) -> dict[str, Any]:
    task = svc.task(pid, title="land me", acceptance_criteria=["green"])
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    sub = worker.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        {
            "generation": attempt["generation"],
            "kind": "code",
            "summary": "done",
            "acceptance_evidence": evidence(["green"]),
            "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/s1",
            "candidate_revision": SHA_A,
            "base_revision": SHA_B,
        },
    )
    integration = next(a for a in sub["activities"] if a["kind"] == "integration")
    integrator = svc.agent(pid, credential_class="integrator", session=False)
    integrator.post(
        f"/api/v1/projects/{pid}/workflow-activities/{integration['id']}/send-back",
        {
            "submission_id": sub["submission"]["id"],
            "reason_code": "check_failed",
            "reason": "unit failed (exit 1)",
            "checks": [{"name": "unit", "outcome": "failed", "exit_code": 1}],
        },
    )
    return task


def test_the_digest_lists_what_needs_a_human(svc: Service, clock: Clock) -> None:
    pid = svc.project(review_mode="none", admit_agent_tasks=True)
    reviewed = svc.project(review_mode="human", admit_agent_tasks=True)
    worker = svc.agent(pid, reviewed, name="worker")
    assert _digest(svc.admin, pid)["needs_attention"] == 0

    # Held by the weekly budget (1): the agent's second task.
    svc.task(pid, caller=worker, title="first agent task")
    held = svc.task(pid, caller=worker, title="second agent task")
    assert held["budget_held"]
    # Blocked with a reason, and released with a handoff.
    blocked = svc.task(pid, title="needs a key")
    att = claim(worker, pid, blocked)["claim"]["attempt"]
    worker.post(
        f"/api/v1/projects/{pid}/attempts/{att['id']}/release",
        {"generation": att["generation"], "handoff": "no API key on this host", "blocked": True},
    )
    # Sent back by the integrator with a failed check.
    landed = _send_back(svc, pid, worker)
    # A human review waits in the other project.
    general = svc.task(reviewed, kind="general")
    submit_general(worker, reviewed, claim(worker, reviewed, general)["claim"]["attempt"])
    # A lease that lapses.
    lapsing = svc.task(pid, title="slow one")
    claim(svc.agent(pid), pid, lapsing)
    # Telemetry: a host that goes quiet, a failing canary, some cost.
    host = svc.agent(pid, credential_class="supervised", session=False)
    host.post(
        f"/api/v1/projects/{pid}/telemetry/cost-rows",
        {"host": "quiet-host", "rows": [{"session_id": "l1", "usd": 1.25}]},
    )
    token = svc.admin.post("/api/v1/admin/agents", {"name": "canary-bot", "projects": [pid]})[
        "token"
    ]
    canary = Caller(svc.client, {"Authorization": f"Bearer {token}"})
    clock.advance(2 * DAY)
    admin = svc.login("admin", ADMIN_PASSWORD)  # browser sessions last 12 hours
    canary.post(
        f"/api/v1/projects/{pid}/telemetry/canary-results",
        {"host": "busy-host", "rows": [{"harness": "claude", "outcome": "timeout"}]},
    )

    got = _digest(admin, pid)
    assert [(t["title"], t["held_for"]) for t in got["proposed_tasks"]] == [
        ("second agent task", "weekly_budget")
    ]
    assert got["parked_tasks"] == []
    assert [(t["title"], t["reason"]) for t in got["blocked_tasks"]] == [
        ("needs a key", "no API key on this host")
    ]
    assert [t["title"] for t in got["recovery_required"]] == ["slow one"]
    assert [(s["task_id"], s["reason_code"], s["failed_checks"]) for s in got["send_backs"]] == [
        (landed["id"], "check_failed", ["unit"])
    ]
    ended = {(a["title"], a["state"], a["handoff"]) for a in got["ended_attempts"]}
    assert ("needs a key", "blocked", "no API key on this host") in ended
    assert [h["host"] for h in got["stale_hosts"]] == ["quiet-host"]
    assert [(c["host"], c["outcome"]) for c in got["canary_failures"]] == [("busy-host", "timeout")]
    assert got["spend"]["last_7d"]["usd"] == 1.25 and got["spend"]["last_24h"]["usd"] == 0
    assert got["spend"]["agent_tasks"]["weekly_budget"] == 1
    assert got["human_reviews"] == []
    assert got["needs_attention"] == 7
    other = _digest(admin, reviewed)
    assert [r["kind"] for r in other["human_reviews"]] == ["human_review"]

    # Old news drops out: a week later the standing problems remain, and both hosts are quiet.
    clock.advance(8 * DAY)
    admin = svc.login("admin", ADMIN_PASSWORD)
    later = _digest(admin, pid)
    assert later["send_backs"] == [] and later["ended_attempts"] == []
    assert [h["host"] for h in later["stale_hosts"]] == ["busy-host", "quiet-host"]
    assert later["blocked_tasks"] and later["proposed_tasks"] and later["canary_failures"]
    clock.advance(5 * DAY)  # quiet-host: silent for 15 days, forgotten
    admin = svc.login("admin", ADMIN_PASSWORD)
    assert [h["host"] for h in _digest(admin, pid)["stale_hosts"]] == ["busy-host"]


def test_a_landing_without_a_required_check_is_listed(svc: Service) -> None:
    pid = svc.project(review_mode="none", required_checks=[{"identity": "unit"}])
    worker = svc.agent(pid)
    task = svc.task(pid, acceptance_criteria=["green"])
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    sub = worker.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        {
            "generation": attempt["generation"],
            "kind": "code",
            "summary": "done",
            "acceptance_evidence": evidence(["green"]),
            "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/s1",
            "candidate_revision": SHA_A,
            "base_revision": SHA_B,
        },
    )
    integration = next(a for a in sub["activities"] if a["kind"] == "integration")
    integrator = svc.agent(pid, credential_class="integrator", session=False)
    integrator.post(
        f"/api/v1/projects/{pid}/workflow-activities/{integration['id']}/landing",
        {
            "submission_id": sub["submission"]["id"],
            "landed_revision": SHA_A,
            "checks": [{"name": "lint", "outcome": "passed"}],
        },
    )
    got = _digest(svc.admin, pid)["unchecked_landings"]
    assert [(x["task_id"], x["missing_checks"]) for x in got] == [(task["id"], ["unit"])]


def test_only_people_of_the_project_and_the_designated_sender_read_the_digest(svc: Service) -> None:
    pid = svc.project()
    other = svc.project()
    sender = svc.agent(pid, other, name="digest-bot", access="read", session=False)
    stranger = svc.agent(pid, name="stranger", session=False)
    for caller in (sender, stranger):  # agents of the project, not designated
        with pytest.raises(ApiError) as err:
            _digest(caller, pid)
        assert err.value.status == 403
    # The digest is for people: an operator (not an admin) of the project reads it; a person
    # of another project does not learn the project exists.
    assert _digest(svc.person(pid), pid)["project"]["id"] == pid
    with pytest.raises(ApiError) as err:
        _digest(svc.person(other), pid)
    assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        _digest(svc.admin, "no-such-project")
    assert err.value.status == 404

    assert "digest-bot" in _designate(svc, pid, "digest-bot")
    assert _digest(sender, pid)["digest_sender"]["agent"] == "digest-bot"
    assert _digest(svc.admin, pid)["digest_sender"]["agent"] == "digest-bot"
    with pytest.raises(ApiError) as err:  # designated for one project only
        _digest(sender, other)
    assert err.value.status == 403
    with pytest.raises(ApiError):
        _digest(stranger, pid)

    _designate(svc, pid, None)
    assert _digest(svc.admin, pid)["digest_sender"] is None
    with pytest.raises(ApiError) as err:
        _digest(sender, pid)
    assert err.value.status == 403


def test_designating_refuses_unknown_projects_and_agents(svc: Service) -> None:
    pid = svc.project()
    name = svc.admin.get(f"/api/v1/projects/{pid}")["name"]
    svc.agent(pid, name="digest-bot", session=False)
    svc.agent(name="ungranted-bot", session=False)
    retired = svc.agent(pid, name="retired-bot", session=False)
    retired_id = retired.get("/api/v1/me")["actor"]["id"]
    svc.admin.post(f"/api/v1/admin/principals/{retired_id}/disable")
    for project, agent, message in (
        ("nope", "digest-bot", "no project nope"),
        (pid, "nobody", "no agent named nobody"),
        (pid, "admin", "no agent named admin"),  # a person is not an agent
        (pid, "retired-bot", "the agent retired-bot is disabled"),
        (
            pid,
            "ungranted-bot",
            f"the agent ungranted-bot is not granted project {name}: grant it the project"
            " (viewer is enough) before designating it",
        ),
    ):
        with pytest.raises(CoordinatorError) as err:
            _designate(svc, project, agent)
        assert err.value.message == message
    assert _digest(svc.admin, pid)["digest_sender"] is None


def _link(caller: Caller, pid: str) -> str:
    url: str = caller.get(f"/api/v1/projects/{pid}/digest/read-link")["url"]
    return url.removeprefix(ORIGIN)


def test_a_read_link_records_only_when_pressed_and_only_until_it_expires(
    svc: Service, clock: Clock
) -> None:
    pid, other = svc.project(), svc.project()
    bot = svc.agent(pid, other, name="digest-bot", access="read", session=False)
    _designate(svc, pid, "digest-bot")
    worker = svc.agent(pid, name="worker", session=False)
    with pytest.raises(ApiError) as refused:
        worker.get(f"/api/v1/projects/{pid}/digest/read-link")
    assert refused.value.status == 403 and "digest sender" in str(refused.value.body)
    with pytest.raises(ApiError):  # designated for pid only
        bot.get(f"/api/v1/projects/{other}/digest/read-link")

    path = _link(bot, pid)
    assert path.startswith("/console/digest-read/")
    svc.client.cookies.clear()
    shown = svc.client.get(path)
    assert shown.status_code == 200 and "I read this" in shown.text
    assert _digest(svc.admin, pid)["last_read"] is None  # opening it records nothing
    svc.client.cookies.clear()
    pressed = svc.client.post(path)
    assert pressed.status_code == 200 and "is recorded" in pressed.text
    read = _digest(svc.admin, pid)["last_read"]
    assert read == {"at": rfc3339(clock.now), "by": "digest-bot", "via": "link"}
    assert _digest(svc.admin, other)["last_read"] is None

    # The payload names its project: another project's id in it breaks the signature.
    payload, mac = path.rsplit("/", 1)[1].split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**body, "p": other}).encode()).decode()
    svc.client.cookies.clear()
    assert svc.client.post(f"/console/digest-read/{forged.rstrip('=')}.{mac}").status_code == 404
    assert _digest(svc.admin, other)["last_read"] is None
    for bad in (f"{payload}.{mac[:-1]}é", "x.%C3%A9", f"{payload}.", "%00.%00"):
        for method in ("GET", "POST"):
            svc.client.cookies.clear()
            answer = svc.client.request(method, f"/console/digest-read/{bad}")
            assert answer.status_code == 404 and "not a digest link" in answer.text, bad

    person = _link(svc.admin, pid)  # a person's link records under that person
    clock.advance(7 * DAY + 1)
    for stale in (path, person):
        svc.client.cookies.clear()
        late = svc.client.post(stale)
        assert late.status_code == 404 and "expired" in late.text
    admin = svc.login("admin", ADMIN_PASSWORD)  # the old browser session has ended too
    fresh = _link(admin, pid)
    svc.client.cookies.clear()
    assert svc.client.post(fresh).status_code == 200
    assert _digest(admin, pid)["last_read"]["by"] == "admin"
