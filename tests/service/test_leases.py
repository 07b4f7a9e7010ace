"""Leases, expiry, fencing and recovery through the API, with service time moved by the test."""

from __future__ import annotations

from typing import Any

import pytest

from tests.service.kit import ApiError, Clock, Service, claim, evidence


def _attempt_path(pid: str, attempt: dict[str, Any], verb: str) -> str:
    return f"/api/v1/projects/{pid}/attempts/{attempt['id']}/{verb}"


def test_expiry_at_equality_and_recovery_claim(svc: Service, clock: Clock) -> None:
    pid = svc.project(lease_seconds=60)
    task = svc.task(pid)
    first, second = svc.agent(pid), svc.agent(pid)
    got = claim(first, pid, task)
    attempt = got["claim"]["attempt"]
    assert got["renew_after_seconds"] == 20
    first.post(
        _attempt_path(pid, attempt, "checkpoints"),
        {"generation": 1, "summary": "step 1", "handoff": "resume from step 2"},
    )
    clock.advance(60)  # now == expires_at: expired
    with pytest.raises(ApiError) as err:
        first.post(_attempt_path(pid, attempt, "renew"), {"generation": 1})
    assert err.value.code == "lease_expired"
    view = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert view["work_status"] == "recovery_required"
    # The lapse was a fruitless attempt: the task is offered again a minute after it lapsed.
    assert view["fruitless_attempts"] == 1 and view["offered_from"] is not None
    assert second.get(f"/api/v1/projects/{pid}/next")["action"] is None
    with pytest.raises(ApiError) as err:
        claim(second, pid, view)
    assert (
        err.value.code == "claim_conflict" and "backing off" in err.value.body["error"]["message"]
    )
    clock.advance(60)
    nxt = second.get(f"/api/v1/projects/{pid}/next")["action"]
    assert nxt["kind"] == "recover_task"
    rec = claim(second, pid, view)
    assert rec["claim"]["attempt"]["generation"] == 2
    assert rec["claim"]["attempt"]["mode"] == "recovery"
    assert rec["claim"]["last_checkpoint"]["handoff"] == "resume from step 2"
    # Fencing: the superseded attempt can neither checkpoint, release nor submit.
    for verb, body in (
        ("checkpoints", {"generation": 1, "summary": "late"}),
        ("release", {"generation": 1, "handoff": "late"}),
        (
            "submissions",
            {
                "generation": 1,
                "kind": "code",
                "summary": "late",
                "acceptance_evidence": evidence(["it works"]),
            },
        ),
    ):
        with pytest.raises(ApiError) as err:
            first.post(_attempt_path(pid, attempt, verb), body)
        assert err.value.code == "lease_expired", verb


def test_a_stale_generation_is_refused_and_another_session_is_denied(
    svc: Service, clock: Clock
) -> None:
    pid = svc.project()
    task = svc.task(pid)
    owner, other = svc.agent(pid), svc.agent(pid)
    attempt = claim(owner, pid, task)["claim"]["attempt"]
    with pytest.raises(ApiError) as err:
        owner.post(_attempt_path(pid, attempt, "renew"), {"generation": 0})
    assert err.value.code == "lease_expired"
    with pytest.raises(ApiError) as err:
        other.post(_attempt_path(pid, attempt, "renew"), {"generation": 1})
    assert (err.value.status, err.value.code) == (403, "operation_not_permitted")
    with pytest.raises(ApiError) as err:
        claim(other, pid, svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}"))
    assert err.value.code == "claim_conflict"


def test_renewal_is_capped_by_max_attempt_seconds(svc: Service, clock: Clock) -> None:
    pid = svc.project(lease_seconds=600, max_attempt_seconds=900)
    task = svc.task(pid)
    agent = svc.agent(pid)
    attempt = claim(agent, pid, task)["claim"]["attempt"]
    clock.advance(500)
    r = agent.post(_attempt_path(pid, attempt, "renew"), {"generation": 1})
    assert r["lease_remaining_ms"] == 400_000  # capped at created + 900 s
    clock.advance(100)
    with pytest.raises(ApiError) as err:
        agent.post(_attempt_path(pid, attempt, "renew"), {"generation": 1})
    assert err.value.code == "attempt_duration_exceeded"


def test_release_makes_the_task_ready_and_blocked_release_blocks(
    svc: Service, clock: Clock
) -> None:
    pid = svc.project()
    task = svc.task(pid)
    agent = svc.agent(pid)
    attempt = claim(agent, pid, task)["claim"]["attempt"]
    out = agent.post(
        _attempt_path(pid, attempt, "release"),
        {"generation": 1, "handoff": "tried X, it fails on Y"},
    )
    assert out["attempt"]["state"] == "released"
    view = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert view["work_status"] == "ready"
    assert view["attempts"][0]["handoff"] == "tried X, it fails on Y"
    clock.advance(60)  # past the backoff of one fruitless attempt
    attempt = claim(agent, pid, view)["claim"]["attempt"]
    agent.post(
        _attempt_path(pid, attempt, "release"),
        {"generation": 2, "handoff": "needs a credential", "blocked": True},
    )
    view = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert view["work_status"] == "blocked"
    assert svc.agent(pid).get(f"/api/v1/projects/{pid}/next")["action"] is None
    view = svc.admin.post(
        f"/api/v1/projects/{pid}/tasks/{task['id']}/unblock",
        {"expected_revision": view["revision"], "reason": "granted"},
    )
    assert view["work_status"] == "ready"


def test_revoking_the_credential_lapses_the_lease(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    data = svc.admin.post("/api/v1/admin/agents", {"name": "doomed", "projects": [pid]})
    from tests.service.kit import Caller

    agent = Caller(svc.client, {"Authorization": f"Bearer {data['token']}"})
    s = agent.post("/api/v1/sessions", {"harness": "test"})
    agent.headers.update(
        {"X-Coordinator-Session": s["session_id"], "X-Coordinator-Session-Proof": s["proof"]}
    )
    claim(agent, pid, task)
    svc.admin.post(f"/api/v1/admin/credentials/{data['credential_id']}/revoke")
    view = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert view["work_status"] == "recovery_required"
    with pytest.raises(ApiError) as err:
        agent.get(f"/api/v1/projects/{pid}")
    assert err.value.status == 401


def test_next_orders_by_priority_then_readiness_then_id(svc: Service, clock: Clock) -> None:
    pid = svc.project()
    low = svc.task(pid, title="low", priority=3)
    clock.advance(1)
    normal_old = svc.task(pid, title="normal old", priority=2)
    clock.advance(1)
    svc.task(pid, title="normal new", priority=2)
    clock.advance(1)
    urgent = svc.task(pid, title="urgent", priority=0)
    agent = svc.agent(pid)
    order = []
    for _ in range(4):
        action = agent.get(f"/api/v1/projects/{pid}/next")["action"]
        order.append(action["title"])
        got = agent.post(f"/api/v1/projects/{pid}/claims", {})  # claim the next ready task
        assert got["claim"]["task"]["id"] == action["task_id"]
    assert order == ["urgent", "normal old", "normal new", "low"]
    assert agent.post(f"/api/v1/projects/{pid}/claims", {})["claim"] is None
    assert {urgent["id"], normal_old["id"], low["id"]}


def test_claims_need_a_session(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    agent = svc.agent(pid, session=False)
    with pytest.raises(ApiError) as err:
        claim(agent, pid, task)
    assert err.value.code == "session_required"
    reader = svc.agent(pid, access="read", session=False)  # it cannot open one
    with pytest.raises(ApiError) as err:
        claim(reader, pid, task)
    assert err.value.status == 403
    assert reader.get(f"/api/v1/projects/{pid}/next")["action"]["task_id"] == task["id"]


def test_recovery_comes_first_even_behind_a_page_of_more_urgent_ready_work(
    svc: Service, clock: Clock
) -> None:
    # A queue claim reads a few candidates first; the lapsed task, least urgent of all, is
    # still offered and claimed before six urgent ready ones (recovery first, in the window).
    pid = svc.project(lease_seconds=60)
    lapsed = svc.task(pid, title="lapsed", priority=3)
    first, second = svc.agent(pid), svc.agent(pid)
    claim(first, pid, lapsed)
    urgent = []
    for i in range(6):
        clock.advance(1)
        urgent.append(svc.task(pid, title=f"urgent {i}", priority=0))
    clock.advance(120)  # the lease lapsed, and the minute of backoff after it passed
    nxt = second.get(f"/api/v1/projects/{pid}/next")
    assert nxt["action"]["kind"] == "recover_task"
    assert nxt["action"]["task_id"] == lapsed["id"]
    assert nxt["inspected"] == 7
    got = second.post(f"/api/v1/projects/{pid}/claims", {})["claim"]
    assert got["task"]["id"] == lapsed["id"]
    assert got["attempt"]["mode"] == "recovery"
    # then the urgent ones, oldest first, and nothing once all are held
    taken = [second.post(f"/api/v1/projects/{pid}/claims", {})["claim"] for _ in urgent]
    assert [c["task"]["id"] for c in taken] == [t["id"] for t in urgent]
    assert second.post(f"/api/v1/projects/{pid}/claims", {})["claim"] is None
    assert second.get(f"/api/v1/projects/{pid}/next") == {
        "role": "implementer",
        "action": None,
        "inspected": 0,
        "retry_after_seconds": 30,
    }
