"""Fruitless attempts back off: a task whose attempts end without a submission (released,
lapsed, or lost with the owner's session) is offered again only after a growing delay, and
after the project's limit in a row it is parked until a person puts it back. Service time is
moved by the test; every rule is checked on `next`, queue claims and claims by id."""

from __future__ import annotations

from typing import Any

import pytest

from agentc.core.status import backoff_ms
from tests.service.kit import ApiError, Caller, Clock, Service, claim, submit_general

MINUTE = 60


def _path(pid: str, attempt: dict[str, Any], verb: str) -> str:
    return f"/api/v1/projects/{pid}/attempts/{attempt['id']}/{verb}"


def _view(svc: Service, pid: str, task: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    return view


def _release_at_once(svc: Service, agent: Caller, pid: str, task: dict[str, Any], n: int) -> None:
    attempt = claim(agent, pid, _view(svc, pid, task))["claim"]["attempt"]
    agent.post(
        _path(pid, attempt, "release"),
        {"generation": attempt["generation"], "handoff": f"gave up at once ({n})"},
    )


def _not_offered(svc: Service, agent: Caller, pid: str, task: dict[str, Any]) -> ApiError:
    """Neither `next`, a queue claim nor a claim by id hands the task out."""
    assert agent.get(f"/api/v1/projects/{pid}/next")["action"] is None
    assert agent.post(f"/api/v1/projects/{pid}/claims", {})["claim"] is None
    with pytest.raises(ApiError) as err:
        claim(agent, pid, _view(svc, pid, task))
    assert err.value.code == "claim_conflict"
    return err.value


def _offered(agent: Caller, pid: str, task: dict[str, Any]) -> None:
    assert agent.get(f"/api/v1/projects/{pid}/next")["action"]["task_id"] == task["id"]


def test_the_delays_double_up_to_a_cap() -> None:
    assert [backoff_ms(n) // 1000 for n in range(9)] == [
        0,
        60,
        120,
        240,
        480,
        960,
        1920,
        3600,
        3600,
    ]
    assert backoff_ms(10**6) == 3600 * 1000


def test_a_task_released_at_once_backs_off_then_is_parked_until_put_back(
    svc: Service, clock: Clock
) -> None:
    pid = svc.project()  # parks after 3 fruitless attempts in a row
    task = svc.task(pid, kind="general", title="hopeless")
    agent = svc.agent(pid)
    for n, delay in ((1, MINUTE), (2, 2 * MINUTE)):
        _release_at_once(svc, agent, pid, task, n)
        view = _view(svc, pid, task)
        assert (view["work_status"], view["fruitless_attempts"], view["parked"]) == (
            "ready",
            n,
            False,
        )
        assert view["offered_from"] is not None
        err = _not_offered(svc, agent, pid, task)
        assert "backing off" in err.body["error"]["message"]
        assert err.body["error"]["details"]["task"]["offered_from"] == view["offered_from"]
        clock.advance(delay - 1)
        _not_offered(svc, agent, pid, task)
        clock.advance(1)
        _offered(agent, pid, task)
        assert _view(svc, pid, task)["offered_from"] is None
    _release_at_once(svc, agent, pid, task, 3)
    view = _view(svc, pid, task)
    assert (view["work_status"], view["fruitless_attempts"], view["parked"]) == (
        "blocked",
        3,
        True,
    )
    clock.advance(10 * 3600)  # parked: no delay ends it
    err = _not_offered(svc, agent, pid, task)
    assert "parked" in err.body["error"]["message"]

    # A person sees it with the attempts' outcomes, newest first.
    digest = svc.admin.get(f"/api/v1/projects/{pid}/attention")
    [parked] = digest["parked_tasks"]
    assert (parked["task_id"], parked["fruitless_attempts"]) == (task["id"], 3)
    assert [a["handoff"] for a in parked["attempts"]] == [
        f"gave up at once ({n})" for n in (3, 2, 1)
    ]
    assert digest["blocked_tasks"] == [] and digest["recovery_required"] == []

    # The agent cannot put it back; a person can, and it is offered at once, counted afresh.
    path = f"/api/v1/projects/{pid}/tasks/{task['id']}/unblock"
    body = {"expected_revision": view["revision"], "reason": "the fixture is fixed"}
    with pytest.raises(ApiError) as err_info:
        agent.post(path, body)
    assert err_info.value.status == 403
    back = svc.admin.post(path, body)
    assert (back["work_status"], back["fruitless_attempts"], back["parked"]) == ("ready", 0, False)
    _offered(agent, pid, task)
    assert svc.admin.get(f"/api/v1/projects/{pid}/attention")["parked_tasks"] == []
    # Once more without a submission: a minute's delay again, not a park; a person may put a
    # task that backs off back at once too.
    _release_at_once(svc, agent, pid, task, 4)
    view = _view(svc, pid, task)
    assert (view["fruitless_attempts"], view["parked"]) == (1, False)
    _not_offered(svc, agent, pid, task)
    svc.admin.post(path, {"expected_revision": view["revision"], "reason": "try now"})
    _offered(agent, pid, task)
    fresh = svc.task(pid, title="never tried")
    with pytest.raises(ApiError) as err_info:  # nothing to put back
        svc.admin.post(
            f"/api/v1/projects/{pid}/tasks/{fresh['id']}/unblock",
            {"expected_revision": 1, "reason": "?"},
        )
    assert err_info.value.code == "task_not_blocked"


def test_a_submission_resets_the_count(svc: Service, clock: Clock) -> None:
    pid = svc.project(review_mode="human", park_after_attempts=3)
    task = svc.task(pid, kind="general")
    worker = svc.agent(pid)
    for n, delay in ((1, MINUTE), (2, 2 * MINUTE)):
        _release_at_once(svc, worker, pid, task, n)
        clock.advance(delay)
    attempt = claim(worker, pid, _view(svc, pid, task))["claim"]["attempt"]
    assert _view(svc, pid, task)["fruitless_attempts"] == 2  # the one that holds is not counted
    sub = submit_general(worker, pid, attempt)
    assert _view(svc, pid, task)["fruitless_attempts"] == 0
    # A person's review sends it back: it is offered at once, with no backoff.
    svc.admin.post(
        f"/api/v1/projects/{pid}/workflow-activities/{sub['activities'][0]['id']}/review",
        {
            "submission_id": sub["submission"]["id"],
            "decision": "changes_requested",
            "summary": "not yet",
            "findings": [{"severity": "required", "remedy": "add a test"}],
        },
    )
    _offered(worker, pid, task)
    _release_at_once(svc, worker, pid, task, 3)
    view = _view(svc, pid, task)
    assert (view["fruitless_attempts"], view["parked"], view["work_status"]) == (1, False, "ready")


def test_a_lapsed_lease_backs_off_from_the_lapse_and_parks_with_its_checkpoint_kept(
    svc: Service, clock: Clock
) -> None:
    pid = svc.project(lease_seconds=60, park_after_attempts=2)
    task = svc.task(pid)
    agent = svc.agent(pid)
    first = claim(agent, pid, task)["claim"]["attempt"]
    clock.advance(60)  # lapsed: a fruitless attempt
    view = _view(svc, pid, task)
    assert (view["work_status"], view["fruitless_attempts"]) == ("recovery_required", 1)
    _not_offered(svc, agent, pid, task)
    clock.advance(60)
    assert agent.get(f"/api/v1/projects/{pid}/next")["action"]["kind"] == "recover_task"
    second = claim(agent, pid, _view(svc, pid, task))["claim"]["attempt"]
    assert second["generation"] == first["generation"] + 1
    agent.post(
        _path(pid, second, "checkpoints"),
        {"generation": second["generation"], "summary": "half", "handoff": "resume at step 3"},
    )
    clock.advance(60)  # lapsed again: two in a row, the limit
    view = _view(svc, pid, task)
    assert (view["work_status"], view["parked"]) == ("blocked", True)
    clock.advance(3600)
    _not_offered(svc, agent, pid, task)
    [parked] = svc.admin.get(f"/api/v1/projects/{pid}/attention")["parked_tasks"]
    assert [a["state"] for a in parked["attempts"]] == ["lapsed", "expired"]
    assert parked["attempts"][0]["handoff"] == "resume at step 3"
    # Put back, the lapsed attempt is recovered with its checkpoint.
    svc.admin.post(
        f"/api/v1/projects/{pid}/tasks/{task['id']}/unblock",
        {"expected_revision": view["revision"], "reason": "retry"},
    )
    rec = claim(agent, pid, _view(svc, pid, task))["claim"]
    assert rec["attempt"]["mode"] == "recovery"
    assert rec["last_checkpoint"]["handoff"] == "resume at step 3"


def test_an_owner_that_closes_its_session_backs_off_from_the_close(
    svc: Service, clock: Clock
) -> None:
    """An agent cannot skip the delay by closing its session instead of releasing."""
    pid = svc.project(lease_seconds=600)
    task = svc.task(pid)
    quitter, other = svc.agent(pid), svc.agent(pid)
    claim(quitter, pid, task)
    clock.advance(10)
    quitter.post(f"/api/v1/sessions/{quitter.headers['X-Coordinator-Session']}/close", {})
    assert _view(svc, pid, task)["work_status"] == "recovery_required"
    _not_offered(svc, other, pid, task)
    clock.advance(MINUTE - 1)
    _not_offered(svc, other, pid, task)
    clock.advance(1)  # a minute after the close, long before the lease would have expired
    assert other.get(f"/api/v1/projects/{pid}/next")["action"]["kind"] == "recover_task"


def test_backed_off_and_parked_tasks_do_not_crowd_the_offer_window(
    svc: Service, clock: Clock
) -> None:
    """The window is the first 50 tasks on offer: more urgent tasks that back off or are
    parked stay out of it, so the task behind them is still offered and claimed."""
    pid = svc.project(park_after_attempts=1)
    urgent = [svc.task(pid, title=f"urgent {i}", priority=0) for i in range(51)]
    clock.advance(1)
    later = svc.task(pid, title="later", priority=3)
    agent = svc.agent(pid)
    for n, task in enumerate(urgent):
        _release_at_once(svc, agent, pid, task, n)  # parked at once (limit 1)
    nxt = agent.get(f"/api/v1/projects/{pid}/next")
    assert (nxt["action"]["task_id"], nxt["inspected"]) == (later["id"], 1)
    assert agent.post(f"/api/v1/projects/{pid}/claims", {})["claim"]["task"]["id"] == later["id"]
    # Limit raised: they are no longer parked, but back off a minute from their release.
    project = svc.admin.get(f"/api/v1/projects/{pid}")["policy"]
    svc.admin.patch(
        f"/api/v1/projects/{pid}/policy",
        {"expected_revision": project["revision"], "park_after_attempts": 2},
    )
    assert agent.get(f"/api/v1/projects/{pid}/next") == {
        "role": "implementer",
        "action": None,
        "inspected": 0,
        "retry_after_seconds": 30,
    }
    clock.advance(MINUTE)
    nxt = agent.get(f"/api/v1/projects/{pid}/next")
    assert nxt["action"]["task_id"] in {t["id"] for t in urgent} and nxt["inspected"] == 50


def test_a_limit_of_0_turns_the_rule_off(svc: Service, clock: Clock) -> None:
    """The project's choice (the lease benchmark's, whose cycle is claim then release): no
    delay and no parking, however many attempts end without a submission."""
    pid = svc.project(park_after_attempts=0)
    task = svc.task(pid)
    agent = svc.agent(pid)
    for n in range(5):
        _release_at_once(svc, agent, pid, task, n)
        view = _view(svc, pid, task)
        assert (view["work_status"], view["offered_from"], view["parked"]) == ("ready", None, False)
        assert view["fruitless_attempts"] == n + 1
        _offered(agent, pid, task)
    with pytest.raises(ApiError) as err:  # nothing to put back
        svc.admin.post(
            f"/api/v1/projects/{pid}/tasks/{task['id']}/unblock",
            {"expected_revision": view["revision"], "reason": "?"},
        )
    assert err.value.code == "task_not_blocked"
