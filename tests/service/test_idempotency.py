"""Idempotency receipts: exact replay, conflicts, secrets kept out of receipts."""

from __future__ import annotations

import json

from tests.service.kit import Clock, Service


def test_same_key_same_body_replays_byte_for_byte(svc: Service) -> None:
    pid = svc.project()
    agent = svc.agent(pid)
    body = {"title": "t", "acceptance_criteria": ["c"]}
    first = agent.raw("POST", f"/api/v1/projects/{pid}/tasks", body, key="create-1")
    again = agent.raw("POST", f"/api/v1/projects/{pid}/tasks", body, key="create-1")
    assert first.status_code == again.status_code == 201
    assert first.content == again.content
    assert again.headers["idempotency-replayed"] == "true"
    tasks = svc.admin.get(f"/api/v1/projects/{pid}/tasks")["items"]
    assert len(tasks) == 1


def test_same_key_other_body_is_a_conflict(svc: Service) -> None:
    pid = svc.project()
    agent = svc.agent(pid)
    agent.raw(
        "POST",
        f"/api/v1/projects/{pid}/tasks",
        {"title": "a", "acceptance_criteria": ["c"]},
        key="k",
    )
    resp = agent.raw(
        "POST",
        f"/api/v1/projects/{pid}/tasks",
        {"title": "b", "acceptance_criteria": ["c"]},
        key="k",
    )
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "idempotency_conflict"


def test_a_claim_replay_does_not_claim_twice(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    agent = svc.agent(pid)
    body = {"task_id": task["id"], "expected_task_revision": 1}
    a = agent.raw("POST", f"/api/v1/projects/{pid}/claims", body, key="claim-1")
    b = agent.raw("POST", f"/api/v1/projects/{pid}/claims", body, key="claim-1")
    assert a.content == b.content
    detail = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert len(detail["attempts"]) == 1


def test_missing_or_bad_key_is_refused(svc: Service) -> None:
    pid = svc.project()
    agent = svc.agent(pid)
    resp = agent.client.post(
        f"/api/v1/projects/{pid}/tasks",
        json={"title": "t", "acceptance_criteria": ["c"]},
        headers=agent.headers,
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "idempotency_key_required"
    resp = agent.raw(
        "POST",
        f"/api/v1/projects/{pid}/tasks",
        {"title": "t", "acceptance_criteria": ["c"]},
        key="x" * 129,
    )
    assert resp.status_code == 400


def test_issued_secrets_never_enter_receipts_or_events(svc: Service) -> None:
    first = svc.admin.raw("POST", "/api/v1/admin/agents", {"name": "bot"}, key="issue-1")
    token = first.json()["data"]["token"]
    replay = svc.admin.raw("POST", "/api/v1/admin/agents", {"name": "bot"}, key="issue-1")
    data = replay.json()["data"]
    assert "token" not in data and data["secret_unavailable"] is True
    from tests.service.kit import Caller

    agent = Caller(svc.client, {"Authorization": f"Bearer {token}"})
    s = agent.raw("POST", "/api/v1/sessions", {"harness": "h"}, key="sess-1").json()["data"]
    again = agent.raw("POST", "/api/v1/sessions", {"harness": "h"}, key="sess-1").json()["data"]
    assert "proof" not in again and again["session_id"] == s["session_id"]

    def dump(tx):
        rows = tx.conn.exec_driver_sql("SELECT body FROM receipts").all()
        ev = tx.conn.exec_driver_sql("SELECT data_json FROM events").all()
        return json.dumps([r[0] for r in rows] + [e[0] for e in ev])

    stored = svc.executor.read(dump)
    assert token not in stored and s["proof"] not in stored


def test_receipts_expire_after_thirty_days(svc: Service, clock: Clock) -> None:
    pid = svc.project()
    agent = svc.agent(pid)
    body = {"title": "t", "acceptance_criteria": ["c"]}
    agent.raw("POST", f"/api/v1/projects/{pid}/tasks", body, key="old")
    clock.advance(31 * 86400)
    resp = agent.raw("POST", f"/api/v1/projects/{pid}/tasks", body, key="old")
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "idempotency_receipt_expired"


def test_a_replay_checks_the_callers_access_first(svc: Service) -> None:
    """Receipts are keyed by principal: another credential of the same agent presenting the
    key and body of a write must not get the write's answer without the right to make it."""
    pid = svc.project()
    writer = svc.agent(pid, name="bot", session=False)
    path, body = f"/api/v1/projects/{pid}/tasks", {"title": "t", "acceptance_criteria": ["c"]}
    assert writer.raw("POST", path, body, key="k1").status_code == 201
    reader = svc.agent(name="bot", access="read", session=False)
    resp = reader.raw("POST", path, body, key="k1")
    assert resp.status_code == 403, resp.text
    assert resp.json()["error"]["message"] == "this credential has read access only"
    # Another write credential of the agent (here its integrator one) may not replay it either.
    integrator = svc.agent(name="bot", credential_class="integrator", session=False)
    resp = integrator.raw("POST", path, body, key="k1")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "idempotency_conflict"
    # The writer itself replays, until its grant of the project is taken away.
    assert writer.raw("POST", path, body, key="k1").headers["idempotency-replayed"] == "true"
    principal = writer.issued["agent_id"]
    svc.admin.post(f"/api/v1/admin/principals/{principal}/projects/{pid}/revoke")
    assert writer.raw("POST", path, body, key="k1").status_code == 404
