"""The console's forms for an agent's proposal and a parked task (approve, cancel, put back)
and the two project settings behind them, over the rules of every console write: the
session, the Origin, the CSRF token, the revision the page was read at, the caller's role."""

from __future__ import annotations

from typing import Any

from tests.service.console.kit import browse_as, form_of, post_form
from tests.service.kit import Caller, Service, claim


def _task(svc: Service, pid: str, task: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    return view


def _page(svc: Service, caller: Caller, path: str) -> str:
    """The page as the caller sees it (a Caller's own request puts its cookie in the jar)."""
    browse_as(svc, caller)
    return svc.client.get(path).text


def _form(svc: Service, caller: Caller, path: str, **fields: str) -> dict[str, str]:
    browse_as(svc, caller)
    return {**form_of(svc, path), **fields}


def test_an_operator_approves_an_agents_proposal_from_its_page(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid, caller=svc.agent(pid), title="Rewrite <b>all</b>")
    olga = svc.person(pid)
    board = _page(svc, olga, f"/console/projects/{pid}")
    assert 'id="col-proposed"' in board and "Rewrite &lt;b&gt;all&lt;/b&gt;" in board
    path = f"/console/projects/{pid}/tasks/{task['id']}"
    page = _page(svc, olga, path)
    assert 'id="proposal"' in page and "does not admit agent-filed tasks" in page
    assert "Approve the task" in page and "Cancel the task" in page
    assert "Put the task back" not in page

    action = path + "/approve"
    form = _form(svc, olga, path, expected_revision="1")
    assert post_form(svc, action, {**form, "csrf": ""}).status_code == 403
    assert post_form(svc, action, form, origin=None).status_code == 403
    assert post_form(svc, action, form, origin="http://evil.example").status_code == 403
    bad = post_form(svc, action, _form(svc, olga, path, expected_revision="first"))
    assert bad.status_code == 422 and "expected_revision" in bad.text
    viewer = svc.person(pid, project_role="viewer")
    refused = post_form(svc, action, _form(svc, viewer, path, expected_revision="1"))
    assert refused.status_code == 403 and "viewer" in refused.text
    assert _task(svc, pid, task)["work_status"] == "proposed"

    browse_as(svc, olga)
    done = post_form(svc, action, form)
    assert done.status_code == 303 and done.headers["location"] == path
    assert _task(svc, pid, task)["work_status"] == "ready"
    assert "Approve the task" not in _page(svc, olga, path)
    again = post_form(svc, action, _form(svc, olga, path, expected_revision="2"))
    assert again.status_code == 409 and "only a proposed task" in again.text
    gone = post_form(svc, path + "/frobnicate", _form(svc, olga, path, expected_revision="2"))
    assert gone.status_code == 404


def test_a_proposal_is_canceled_with_a_reason(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid, caller=svc.agent(pid))
    path = f"/console/projects/{pid}/tasks/{task['id']}"
    action = path + "/cancel"
    empty = post_form(svc, action, _form(svc, svc.admin, path, expected_revision="1"))
    assert empty.status_code == 422 and "reason" in empty.text
    form = _form(svc, svc.admin, path, expected_revision="1", reason="out of scope")
    assert post_form(svc, action, form).status_code == 303
    view = _task(svc, pid, task)
    assert (view["work_status"], view["blocked_reason"]) == ("canceled", "out of scope")
    assert "Cancel the task" not in _page(svc, svc.admin, path)


def test_a_parked_task_is_shown_with_its_attempts_and_put_back(svc: Service) -> None:
    pid = svc.project(park_after_attempts=1)
    task = svc.task(pid, title="Flaky")
    agent = svc.agent(pid)
    attempt = claim(agent, pid, task)["claim"]["attempt"]
    agent.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/release",
        {"generation": attempt["generation"], "handoff": "no <tool> here"},
    )
    olga = svc.person(pid)
    board = _page(svc, olga, f"/console/projects/{pid}")
    assert "· parked ·" in board
    digest = _page(svc, olga, f"/console/projects/{pid}/attention")
    assert "Parked: attempts kept ending without a submission" in digest
    assert "no &lt;tool&gt; here" in digest and "1 attempts in a row" in digest
    path = f"/console/projects/{pid}/tasks/{task['id']}"
    page = _page(svc, olga, path)
    assert 'id="parked"' in page and "Put the task back" in page

    action = path + "/unblock"
    form = _form(svc, olga, path, expected_revision="1", reason="installed the tool")
    assert post_form(svc, action, {**form, "csrf": "0" * 64}).status_code == 403
    assert _task(svc, pid, task)["parked"]
    browse_as(svc, olga)
    assert post_form(svc, action, form).status_code == 303
    view = _task(svc, pid, task)
    assert (view["work_status"], view["parked"], view["fruitless_attempts"]) == ("ready", False, 0)
    page = _page(svc, olga, path)
    assert 'id="parked"' not in page and "Put the task back" not in page
    stale = post_form(svc, action, _form(svc, olga, path, expected_revision="1", reason="x"))
    assert stale.status_code == 409


def test_the_settings_form_sets_admission_and_parking(svc: Service) -> None:
    pid = svc.project()
    path = f"/console/projects/{pid}/settings"
    page = _page(svc, svc.admin, path)
    assert "wait, proposed, for a person's approval" in page
    assert 'name="park_after_attempts" type="number" required min="0" max="100" value="3"' in page
    fields = {
        "expected_revision": "1",
        "repository_url": "https://git.example/app.git",
        "target_branch": "main",
        "review_mode": "agent",
        "lease_seconds": "600",
        "max_attempt_seconds": "0",
        "required_checks": "",
    }
    for park in ("-1", "101", "soon"):
        resp = post_form(svc, path, _form(svc, svc.admin, path, **fields, park_after_attempts=park))
        assert resp.status_code == 422 and "park_after_attempts" in resp.text, park
    form = _form(svc, svc.admin, path, **fields, park_after_attempts="5", admit_agent_tasks="on")
    assert post_form(svc, path, form).status_code == 303
    policy = svc.admin.get(f"/api/v1/projects/{pid}")["policy"]
    assert (policy["admit_agent_tasks"], policy["park_after_attempts"]) == (True, 5)
    page = _page(svc, svc.admin, path)
    assert "go to the queue by themselves" in page and 'name="admit_agent_tasks" checked' in page
    # An unchecked box is "no".
    form = _form(
        svc, svc.admin, path, **{**fields, "expected_revision": "2"}, park_after_attempts="5"
    )
    assert post_form(svc, path, form).status_code == 303
    assert svc.admin.get(f"/api/v1/projects/{pid}")["policy"]["admit_agent_tasks"] is False
