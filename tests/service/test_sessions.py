"""Agent sessions: client-made proofs (a lost answer loses nothing), held attempts, checkouts."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from tests.service.kit import SHA_A, SHA_B, ApiError, Caller, Service, claim, evidence


def test_a_client_made_proof_survives_a_lost_answer(svc: Service) -> None:
    data = svc.admin.post("/api/v1/admin/agents", {"name": "careful"})
    proof = secrets.token_hex(32)
    agent = Caller(
        svc.client,
        {"Authorization": f"Bearer {data['token']}", "X-Coordinator-Session-Proof": proof},
    )
    body = {"session_id": "careful-1", "harness": "claude"}
    first = agent.raw("POST", "/api/v1/sessions", body, key="open-1")
    assert first.status_code == 201
    assert "proof" not in first.json()["data"]
    assert first.json()["data"]["agent"] == "careful"
    # The answer was "lost": the same request with the same key replays the same session.
    again = agent.raw("POST", "/api/v1/sessions", body, key="open-1")
    assert again.content == first.content
    agent.headers["X-Coordinator-Session"] = "careful-1"
    me = agent.get("/api/v1/me")
    assert me["actor"]["session_id"] == "careful-1"
    # Another key for the same id is a conflict, not a second session.
    other = Caller(
        svc.client,
        {
            "Authorization": f"Bearer {data['token']}",
            "X-Coordinator-Session-Proof": secrets.token_hex(32),
        },
    )
    resp = other.raw("POST", "/api/v1/sessions", body, key="open-2")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "session_conflict"


def test_a_read_only_credential_opens_no_session(svc: Service) -> None:
    pid = svc.project()
    reader = svc.agent(pid, access="read", session=False)
    resp = reader.raw("POST", "/api/v1/sessions", {"session_id": "peek", "harness": "h"})
    assert resp.status_code == 403, resp.text
    assert resp.json()["error"]["code"] == "operation_not_permitted"

    def written(tx: Any) -> list[Any]:
        sessions = tx.conn.exec_driver_sql("SELECT id FROM agent_sessions").all()
        events = tx.conn.exec_driver_sql(
            "SELECT kind FROM events WHERE kind = 'agent_session_registered'"
        ).all()
        return [*sessions, *events]

    assert svc.executor.read(written) == []
    assert reader.get(f"/api/v1/projects/{pid}/tasks")["items"] == []  # it still reads


def test_the_session_lists_what_it_holds(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    agent = svc.agent(pid)
    attempt = claim(agent, pid, task)["claim"]["attempt"]
    sid = agent.headers["X-Coordinator-Session"]
    view = agent.get(f"/api/v1/sessions/{sid}")
    assert [h["attempt_id"] for h in view["held_attempts"]] == [attempt["id"]]
    assert view["held_attempts"][0]["lease_live"] is True
    assert view["agent"] == agent.get("/api/v1/me")["actor"]["name"]
    with pytest.raises(ApiError) as err:
        svc.agent(pid).get(f"/api/v1/sessions/{sid}")
    assert err.value.status == 404  # an agent sees only its own session


def test_checkout_registration(svc: Service) -> None:
    pid = svc.project(review_mode="none")
    task = svc.task(pid)
    agent = svc.agent(pid)
    attempt = claim(agent, pid, task)["claim"]["attempt"]
    path = f"/api/v1/projects/{pid}/attempts/{attempt['id']}/checkout"
    body = {
        "generation": 1,
        "path": "/work/clone/agentc-checkout",
        "branch": "agentc/s1",
        "base_revision": SHA_B,
    }
    out = agent.post(path, body)
    assert out["checkout"]["branch"] == "agentc/s1"
    assert agent.post(path, body)["checkout"] == out["checkout"]  # the same again is fine
    with pytest.raises(ApiError) as err:
        agent.post(path, {**body, "branch": "elsewhere"})
    assert err.value.code == "checkout_registered"
    detail = agent.get(f"/api/v1/projects/{pid}/attempts/{attempt['id']}")
    assert detail["checkout"]["base_revision"] == SHA_B
    submission = {
        "generation": 1,
        "kind": "code",
        "summary": "s",
        "acceptance_evidence": evidence(["it works"]),
        "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/s1",
        "candidate_revision": SHA_A,
        "base_revision": SHA_A,
    }
    with pytest.raises(ApiError) as err:
        agent.post(f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions", submission)
    assert err.value.code == "base_revision_mismatch"
    out = agent.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        {**submission, "base_revision": SHA_B},
    )
    assert out["task"]["work_status"] == "waiting_integration"
