"""Project grants: admin-managed, per principal; people have a role per project."""

from __future__ import annotations

import pytest

from tests.service.kit import ApiError, Service, claim


def _grants(svc: Service, principal_id: str) -> list[tuple[str, str]]:
    items = svc.admin.get(f"/api/v1/admin/principals/{principal_id}/projects")["items"]
    return [(g["project_id"], g["role"]) for g in items]


def test_an_admin_grants_and_revokes_projects(svc: Service) -> None:
    mine, other = svc.project(), svc.project()
    agent = svc.agent(mine)
    principal = agent.issued["agent_id"]
    assert agent.issued["projects"] == [mine]
    me = agent.get("/api/v1/me")
    assert me["all_projects"] is False and me["projects"] == [{"project_id": mine, "role": "agent"}]
    with pytest.raises(ApiError) as err:
        agent.get(f"/api/v1/projects/{other}/tasks")
    assert err.value.status == 404 and err.value.code == "project_not_found"

    path = f"/api/v1/admin/principals/{principal}/projects"
    granted = svc.admin.post(path, {"project_id": other}, key="grant-1")
    assert granted == {"principal_id": principal, "project_id": other, "role": "agent"}
    assert svc.admin.post(path, {"project_id": other}, key="grant-1") == granted  # a replay
    assert agent.get(f"/api/v1/projects/{other}/tasks")["items"] == []
    assert sorted(_grants(svc, principal)) == sorted([(mine, "agent"), (other, "agent")])

    svc.admin.post(f"{path}/{other}/revoke")
    with pytest.raises(ApiError) as err:
        agent.get(f"/api/v1/projects/{other}/tasks")
    assert err.value.status == 404
    assert _grants(svc, principal) == [(mine, "agent")]
    kinds = [e["kind"] for e in svc.admin.get(f"/api/v1/projects/{other}/events")["items"]]
    assert kinds[-2:] == ["project_granted", "project_grant_revoked"]


def test_granting_is_for_admins_and_checks_its_input(svc: Service) -> None:
    pid = svc.project()
    agent = svc.agent(pid)
    principal = agent.issued["agent_id"]
    path = f"/api/v1/admin/principals/{principal}/projects"
    operator = svc.person(pid)
    for caller in (agent, operator):
        with pytest.raises(ApiError) as err:
            caller.post(path, {"project_id": pid})
        assert err.value.status == 403
    with pytest.raises(ApiError) as err:
        svc.admin.post(path, {"project_id": "no-such-project"})
    assert err.value.code == "project_not_found"
    with pytest.raises(ApiError) as err:
        svc.admin.post(path, {"project_id": pid, "role": "operator"})  # agents hold "agent"
    assert err.value.status == 422 and "role" in err.value.body["error"]["message"]
    with pytest.raises(ApiError) as err:
        svc.admin.post("/api/v1/admin/principals/nobody/projects", {"project_id": pid})
    assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        svc.admin.post("/api/v1/admin/agents", {"name": "twice", "projects": [pid, pid]})
    assert err.value.status == 422
    with pytest.raises(ApiError) as err:
        svc.admin.post("/api/v1/admin/agents", {"name": "lost", "projects": ["nope"]})
    assert err.value.code == "project_not_found"
    kept = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql("SELECT id FROM principals WHERE name = 'lost'").all()
    )
    assert kept == []  # nothing of the refused request was written


def test_people_have_a_role_per_project(svc: Service) -> None:
    pid, other = svc.project(), svc.project()
    operator = svc.person(pid)
    viewer = svc.person(pid, project_role="viewer")
    task = svc.task(pid, caller=operator)  # an operator changes the project's work
    assert viewer.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")["id"] == task["id"]
    with pytest.raises(ApiError) as err:
        svc.task(pid, caller=viewer)
    assert err.value.status == 403 and "viewer" in err.value.body["error"]["message"]
    for person in (operator, viewer):
        with pytest.raises(ApiError) as err:
            person.get(f"/api/v1/projects/{other}")
        assert err.value.status == 404
        assert [p["id"] for p in person.get("/api/v1/projects")["items"]] == [pid]
    # Only admins create projects (tests/service/test_console_users_rules.py); a new project
    # is reached by the admins and whoever an admin grants it to.
    made = svc.project()
    for person in (operator, viewer):
        assert made not in {p["id"] for p in person.get("/api/v1/projects")["items"]}
    admin_me = svc.admin.get("/api/v1/me")
    assert admin_me["all_projects"] is True and admin_me["projects"] == []


def test_a_revoked_grant_cuts_off_work_in_progress(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    agent = svc.agent(pid)
    attempt = claim(agent, pid, task)["claim"]["attempt"]
    principal = agent.issued["agent_id"]
    svc.admin.post(f"/api/v1/admin/principals/{principal}/projects/{pid}/revoke")
    with pytest.raises(ApiError) as err:
        agent.post(
            f"/api/v1/projects/{pid}/attempts/{attempt['id']}/renew",
            {"generation": attempt["generation"]},
        )
    assert err.value.code == "project_not_found"
    # Its session no longer shows the attempt to an operator of another project.
    sid = agent.headers["X-Coordinator-Session"]
    outsider = svc.person(svc.project())
    assert outsider.get(f"/api/v1/sessions/{sid}")["held_attempts"] == []
    assert len(svc.admin.get(f"/api/v1/sessions/{sid}")["held_attempts"]) == 1
