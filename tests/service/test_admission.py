"""The weekly agent-task budget and the canary class."""

from __future__ import annotations

import pytest

from tests.service.kit import ApiError, Caller, Clock, Service


def test_agent_tasks_beyond_the_weekly_budget_are_held(svc: Service, clock: Clock) -> None:
    # Projects that admit agent-filed tasks by themselves, within the weekly budget.
    pid, other = svc.project(admit_agent_tasks=True), svc.project(admit_agent_tasks=True)
    agent = svc.agent(pid, other)
    held = []
    for i in range(7):
        out = agent.post(
            f"/api/v1/projects/{pid}/tasks", {"title": f"t{i}", "acceptance_criteria": ["c"]}
        )
        held.append(out["admission"]["held"])
    assert held == [False] * 5 + [True] * 2
    assert out["task"]["lifecycle"] == "planned" and out["task"]["budget_held"]
    assert out["task"]["work_status"] == "proposed" and out["task"]["held_for"] == "weekly_budget"
    assert out["admission"]["hold"] == "weekly_budget"
    # The budget is per project; humans are not budgeted.
    assert not agent.post(
        f"/api/v1/projects/{other}/tasks", {"title": "x", "acceptance_criteria": ["c"]}
    )["admission"]["held"]
    assert not svc.admin.post(
        f"/api/v1/projects/{pid}/tasks", {"title": "h", "acceptance_criteria": ["c"]}
    )["admission"]["held"]
    # Only a human opens a held task.
    task = out["task"]
    opened = svc.admin.patch(
        f"/api/v1/projects/{pid}/tasks/{task['id']}",
        {"expected_revision": task["revision"], "planned": False},
    )
    assert opened["work_status"] == "ready"
    # A new ISO week admits again.
    clock.advance(7 * 86400)
    assert not agent.post(
        f"/api/v1/projects/{pid}/tasks", {"title": "next week", "acceptance_criteria": ["c"]}
    )["admission"]["held"]


def test_canary_class_only_for_listed_principals(svc: Service) -> None:
    pid = svc.project(admit_agent_tasks=True)
    stranger = svc.agent(pid)
    with pytest.raises(ApiError) as err:
        stranger.post(
            f"/api/v1/projects/{pid}/tasks",
            {"title": "c", "acceptance_criteria": ["c"], "admission_class": "canary"},
        )
    assert err.value.status == 403
    assert svc.admin.get(f"/api/v1/projects/{pid}/tasks")["items"] == []
    data = svc.admin.post("/api/v1/admin/agents", {"name": "canary-bot", "projects": [pid]})
    canary = Caller(svc.client, {"Authorization": f"Bearer {data['token']}"})
    for i in range(8):  # exempt from the budget
        out = canary.post(
            f"/api/v1/projects/{pid}/tasks",
            {
                "title": f"c{i}",
                "acceptance_criteria": ["c"],
                "admission_class": "canary",
                "priority": 0,
            },
        )
        assert not out["admission"]["held"]
    # ...and canaries do not use up the budget of genuine agent tasks.
    assert not stranger.post(
        f"/api/v1/projects/{pid}/tasks", {"title": "real", "acceptance_criteria": ["c"]}
    )["admission"]["held"]
