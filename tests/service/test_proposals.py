"""Agent-filed tasks are proposed: they wait, planned, for a person with write access to the
project to approve (or cancel) them, unless the project admits agent tasks by itself. Agents
try to get past that: claim the proposal by id, approve it, open it by an edit, unblock it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.service.kit import ApiError, Caller, Service, claim


def _events(svc: Service, kind: str) -> list[tuple[str | None, dict[str, Any]]]:
    rows = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql(
            f"SELECT actor_id, data_json FROM events WHERE kind = '{kind}' ORDER BY seq"
        ).fetchall()
    )
    return [(r[0], json.loads(r[1])) for r in rows]


def _me(caller: Caller) -> str:
    principal: str = caller.get("/api/v1/me")["actor"]["id"]
    return principal


def _refused(status: int, code: str, call: Any, *args: Any) -> ApiError:
    with pytest.raises(ApiError) as err:
        call(*args)
    assert (err.value.status, err.value.code) == (status, code), err.value.body
    return err.value


def test_an_agents_task_waits_for_a_persons_approval(svc: Service) -> None:
    pid = svc.project()
    author, other = svc.agent(pid), svc.agent(pid)
    out = author.post(
        f"/api/v1/projects/{pid}/tasks",
        {"title": "rewrite everything", "acceptance_criteria": ["c"], "planned": False},
    )
    task = out["task"]
    assert out["admission"]["held"] and out["admission"]["hold"] == "approval"
    assert "approves it" in out["admission"]["reason"]
    assert (task["lifecycle"], task["work_status"], task["held_for"]) == (
        "planned",
        "proposed",
        "approval",
    )
    assert not task["budget_held"]

    # Not offered, and not claimable by id, by its author or by anyone.
    for agent in (author, other):
        assert agent.get(f"/api/v1/projects/{pid}/next")["action"] is None
        assert agent.post(f"/api/v1/projects/{pid}/claims", {})["claim"] is None
        err = _refused(409, "claim_conflict", claim, agent, pid, task)
        assert err.body["error"]["details"]["task"]["work_status"] == "proposed"

    # Agents cannot approve it, open it by an edit, or put it back.
    path = f"/api/v1/projects/{pid}/tasks/{task['id']}"
    revision = {"expected_revision": task["revision"]}
    for agent in (author, other):
        err = _refused(403, "operation_not_permitted", agent.post, path + "/approve", revision)
        assert err.body["error"]["details"]["required_actor"] == "human"
        _refused(403, "operation_not_permitted", agent.patch, path, {**revision, "planned": False})
        _refused(
            403,
            "operation_not_permitted",
            agent.post,
            path + "/unblock",
            {**revision, "reason": "x"},
        )
    # A person who only views the project cannot either.
    viewer = svc.person(pid, project_role="viewer")
    _refused(403, "operation_not_permitted", viewer.post, path + "/approve", revision)
    assert svc.admin.get(path)["work_status"] == "proposed"

    # An operator of the project approves it: it goes to the queue.
    operator = svc.person(pid)
    approved = operator.post(path + "/approve", revision)
    assert (approved["lifecycle"], approved["work_status"], approved["held_for"]) == (
        "open",
        "ready",
        None,
    )
    assert _events(svc, "task.approved") == [(_me(operator), {"held_for": "approval"})]
    _refused(409, "task_not_proposed", operator.post, path + "/approve", {"expected_revision": 2})
    assert other.get(f"/api/v1/projects/{pid}/next")["action"]["task_id"] == task["id"]
    assert claim(other, pid, approved)["claim"]["task"]["work_status"] == "in_progress"


def test_a_stale_approval_is_refused_and_a_person_may_cancel_instead(svc: Service) -> None:
    pid = svc.project()
    agent = svc.agent(pid)
    task = svc.task(pid, caller=agent)
    path = f"/api/v1/projects/{pid}/tasks/{task['id']}"
    svc.admin.patch(path, {"expected_revision": 1, "title": "a clearer title"})  # revision 2
    _refused(409, "revision_conflict", svc.admin.post, path + "/approve", {"expected_revision": 1})
    _refused(
        403,
        "operation_not_permitted",
        agent.post,
        path + "/cancel",
        {"expected_revision": 2, "reason": "x"},
    )
    canceled = svc.admin.post(path + "/cancel", {"expected_revision": 2, "reason": "not wanted"})
    assert canceled["work_status"] == "canceled"
    _refused(409, "task_not_proposed", svc.admin.post, path + "/approve", {"expected_revision": 3})
    _refused(409, "claim_conflict", claim, agent, pid, canceled)


def test_opening_a_proposal_by_an_edit_is_an_approval(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid, caller=svc.agent(pid))
    path = f"/api/v1/projects/{pid}/tasks/{task['id']}"
    still = svc.admin.patch(path, {"expected_revision": 1, "title": "renamed"})
    assert still["work_status"] == "proposed"  # an edit alone approves nothing
    opened = svc.admin.patch(path, {"expected_revision": 2, "planned": False})
    assert (opened["work_status"], opened["held_for"]) == ("ready", None)
    assert [data for _actor, data in _events(svc, "task.approved")] == [{"held_for": "approval"}]
    # Planned again by a person, it is a planned task, not a proposal.
    replanned = svc.admin.patch(path, {"expected_revision": 3, "planned": True})
    assert replanned["work_status"] == "planned"


def test_people_and_listed_canaries_are_not_held(svc: Service) -> None:
    pid = svc.project()
    assert svc.task(pid)["work_status"] == "ready"
    assert svc.task(pid, caller=svc.person(pid))["work_status"] == "ready"
    data = svc.admin.post("/api/v1/admin/agents", {"name": "canary-bot", "projects": [pid]})
    canary = Caller(svc.client, {"Authorization": f"Bearer {data['token']}"})
    out = canary.post(
        f"/api/v1/projects/{pid}/tasks",
        {"title": "canary", "acceptance_criteria": ["c"], "admission_class": "canary"},
    )
    assert out["task"]["work_status"] == "ready" and out["admission"]["budget_exempt"] == "canary"
    # A task a person files is never approved: there is nothing to approve.
    task = svc.task(pid)
    _refused(
        409,
        "task_not_proposed",
        svc.admin.post,
        f"/api/v1/projects/{pid}/tasks/{task['id']}/approve",
        {"expected_revision": 1},
    )


def test_a_project_may_admit_agent_tasks_by_itself(svc: Service) -> None:
    pid = svc.project()
    agent = svc.agent(pid)
    assert svc.task(pid, caller=agent)["work_status"] == "proposed"
    policy = f"/api/v1/projects/{pid}/policy"
    got = svc.admin.patch(policy, {"expected_revision": 1, "admit_agent_tasks": True})
    assert got["policy"]["admit_agent_tasks"] is True
    out = agent.post(f"/api/v1/projects/{pid}/tasks", {"title": "t", "acceptance_criteria": ["c"]})
    assert out["task"]["work_status"] == "ready" and not out["admission"]["held"]
    # The proposal filed before the change still waits for a person.
    items = svc.admin.get(f"/api/v1/projects/{pid}/tasks")["items"]
    assert sorted(t["work_status"] for t in items) == ["proposed", "ready"]
    svc.admin.patch(policy, {"expected_revision": 2, "admit_agent_tasks": False})
    assert svc.task(pid, caller=agent)["work_status"] == "proposed"
    changes = [data["changes"] for _actor, data in _events(svc, "policy.updated")]
    assert changes == [{"admit_agent_tasks": True}, {"admit_agent_tasks": False}]


def test_the_settings_are_validated_and_audited(svc: Service) -> None:
    pid = svc.project()
    policy = f"/api/v1/projects/{pid}/policy"
    defaults = svc.admin.get(f"/api/v1/projects/{pid}")["policy"]
    assert (defaults["admit_agent_tasks"], defaults["park_after_attempts"]) == (False, 3)
    for bad in (
        {"park_after_attempts": -1},
        {"park_after_attempts": 101},
        {"park_after_attempts": "3"},
        {"park_after_attempts": 2.5},
        {"admit_agent_tasks": "yes"},
        {"admit_agent_tasks": 1},
    ):
        err = _refused(
            422, "invalid_input", svc.admin.patch, policy, {"expected_revision": 1, **bad}
        )
        assert err.body["error"]["message"].startswith(next(iter(bad))), err.body
    got = svc.admin.patch(policy, {"expected_revision": 1, "park_after_attempts": 5})
    assert got["policy"]["park_after_attempts"] == 5 and got["policy"]["revision"] == 2
    operator = svc.person(pid)
    _refused(
        403,
        "operation_not_permitted",
        operator.patch,
        policy,
        {"expected_revision": 2, "park_after_attempts": 9},
    )
    assert [data["changes"] for _a, data in _events(svc, "policy.updated")] == [
        {"park_after_attempts": 5}
    ]
    made = svc.admin.post(
        "/api/v1/projects",
        {
            "name": "admits",
            "repository_url": "https://x/y",
            "admit_agent_tasks": True,
            "park_after_attempts": 1,
        },
    )
    assert (made["policy"]["admit_agent_tasks"], made["policy"]["park_after_attempts"]) == (True, 1)
