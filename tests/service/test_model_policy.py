"""Model policies (issue 30, decision D47): set by admins per project and per task, read by
the loop as the task's effective policy; never set with an agent's or a launch's credential."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.service.kit import ApiError, Service
from tests.service.test_attempt_credentials import launch

OLGA = "olga's passphrase"
PROJECT_POLICY = {
    "allowed_models": ["claude-*", "gpt-5"],
    "max_output_tokens": 8192,
    "max_turns": 40,
    "max_usd": None,
}


def test_the_effective_policy_takes_the_task_value_where_it_sets_one(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    base = f"/api/v1/projects/{pid}"
    before = svc.admin.get(f"{base}/tasks/{task['id']}/model-policy")
    assert before["effective"] == {
        "allowed_models": None,
        "max_output_tokens": None,
        "max_turns": None,
        "max_usd": None,
    }
    assert before["project"]["revision"] == before["task"]["revision"] == 0
    project = svc.admin.call(
        "PUT", f"{base}/model-policy", {"expected_revision": 0, **PROJECT_POLICY}
    )
    assert project["revision"] == 1 and project["policy"] == PROJECT_POLICY
    assert svc.admin.get(f"{base}/model-policy") == project
    got = svc.admin.call(
        "PUT",
        f"{base}/tasks/{task['id']}/model-policy",
        {"expected_revision": 0, "max_turns": 5, "max_usd": 2},
    )
    assert got["effective"] == {
        "allowed_models": ["claude-*", "gpt-5"],
        "max_output_tokens": 8192,
        "max_turns": 5,
        "max_usd": 2.0,
    }
    assert got["sources"] == {
        "allowed_models": "project",
        "max_output_tokens": "project",
        "max_turns": "task",
        "max_usd": "task",
    }
    assert got["task"]["revision"] == 1
    # What an agent of the project (the loop) reads is the same.
    loop = svc.agent(pid)
    assert loop.get(f"{base}/tasks/{task['id']}/model-policy")["effective"] == got["effective"]
    # Compare-and-set: a stale revision is refused, the policy stays.
    with pytest.raises(ApiError) as err:
        svc.admin.call("PUT", f"{base}/tasks/{task['id']}/model-policy", {"expected_revision": 0})
    assert err.value.status == 409 and err.value.code == "revision_conflict"
    # Replaced whole: a null field is no longer set at the task.
    again = svc.admin.call(
        "PUT", f"{base}/tasks/{task['id']}/model-policy", {"expected_revision": 1, "max_turns": 9}
    )
    assert again["effective"]["max_usd"] is None and again["effective"]["max_turns"] == 9
    rows = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql(
            "SELECT data_json FROM events WHERE kind = 'model_policy.updated' ORDER BY seq"
        ).fetchall()
    )
    events = [json.loads(r[0]) for r in rows]
    assert [e["revision"] for e in events] == [1, 1, 2]
    assert events[1]["task_id"] == task["id"] and events[1]["max_turns"] == 5


def test_bad_policies_are_refused_naming_the_field(svc: Service) -> None:
    pid = svc.project()
    path = f"/api/v1/projects/{pid}/model-policy"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"allowed_models": ["claude sonnet"]}, "allowed_models"),
        ({"allowed_models": ["x"] * 51}, "allowed_models"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_turns": "5"}, "max_turns"),
        ({"max_usd": -1}, "max_usd"),
        ({"max_usd": "1e400"}, "max_usd"),
        ({"cap": 1}, "cap"),
    ]
    for body, field in cases:
        with pytest.raises(ApiError) as err:
            svc.admin.call("PUT", path, {"expected_revision": 0, **body})
        assert err.value.status == 422, body
        assert field in json.dumps(err.value.body), body
    assert svc.admin.get(path)["revision"] == 0


def test_only_admins_set_a_policy_never_an_agent_or_a_launch(svc: Service) -> None:
    run = launch(svc)
    pid, task = run.pid, run.task["id"]
    svc.admin.post("/api/v1/admin/people", {"name": "olga", "role": "operator", "password": OLGA})
    olga = svc.login("olga", OLGA)
    svc.grant(olga, pid, role="operator")
    paths = [
        f"/api/v1/projects/{pid}/model-policy",
        f"/api/v1/projects/{pid}/tasks/{task}/model-policy",
    ]
    body = {"expected_revision": 0, "allowed_models": ["*"], "max_usd": 1000}
    for caller in (olga, svc.agent(pid), run.loop, run.agent):
        for path in paths:
            with pytest.raises(ApiError) as err:
                caller.call("PUT", path, body)
            assert err.value.status == 403, (caller.headers, path)
    # The launch cannot even read it (its credential's scope is its own seven requests).
    with pytest.raises(ApiError) as err:
        run.agent.get(paths[1])
    assert err.value.status == 403
    assert svc.admin.get(paths[1])["effective"]["max_usd"] is None


def test_a_task_of_another_project_is_not_found(svc: Service) -> None:
    one, two = svc.project(), svc.project()
    task = svc.task(one)
    path = f"/api/v1/projects/{two}/tasks/{task['id']}/model-policy"
    for call in (
        lambda: svc.admin.get(path),
        lambda: svc.admin.call("PUT", path, {"expected_revision": 0, "max_turns": 3}),
    ):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.status == 404
    assert (
        svc.admin.get(f"/api/v1/projects/{one}/tasks/{task['id']}/model-policy")["task"]["revision"]
        == 0
    )
