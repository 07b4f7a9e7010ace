"""The whole work model through the API: claim, lease, submit, review, land."""

from __future__ import annotations

import pytest

from tests.service.kit import (
    SHA_A,
    SHA_B,
    ApiError,
    Clock,
    Service,
    claim,
    evidence,
    submit_general,
)


def _submit_code(agent, pid, attempt, criteria, **extra):
    return agent.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        {
            "generation": attempt["generation"],
            "kind": "code",
            "summary": "did it",
            "acceptance_evidence": evidence(criteria),
            "candidate_ref": f"refs/agent-coordinator/candidates/{attempt['task_id']}/s1",
            "candidate_revision": SHA_A,
            "base_revision": SHA_B,
            **extra,
        },
    )


def test_code_task_from_claim_to_landing(svc: Service, clock: Clock) -> None:
    pid = svc.project(review_mode="agent")
    task = svc.task(pid, acceptance_criteria=["tests pass", "docs updated"])
    assert task["work_status"] == "ready"
    worker, reviewer = svc.agent(pid), svc.agent(pid)
    integrator = svc.agent(pid, credential_class="integrator", session=False)

    nxt = worker.get(f"/api/v1/projects/{pid}/next")
    assert nxt["action"]["task_id"] == task["id"]
    got = claim(worker, pid, task)
    attempt = got["claim"]["attempt"]
    assert attempt["generation"] == 1
    assert got["renew_after_seconds"] == 60
    assert got["claim"]["lease_remaining_ms"] == 600_000
    assert worker.get(f"/api/v1/projects/{pid}/next")["action"] is None

    clock.advance(30)
    cp = worker.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/checkpoints",
        {"generation": 1, "summary": "half way", "handoff": "continue with docs"},
    )
    assert cp["attempt"]["expires_at"] == attempt["expires_at"]  # a checkpoint never renews
    renewed = worker.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/renew", {"generation": 1}
    )
    assert renewed["lease_remaining_ms"] == 600_000

    sub = _submit_code(worker, pid, attempt, ["tests pass", "docs updated"])
    assert sub["task"]["work_status"] == "waiting_review"
    review = next(a for a in sub["activities"] if a["kind"] == "agent_review")
    integration = next(a for a in sub["activities"] if a["kind"] == "integration")
    assert integration["state"] == "waiting"

    # The author may not review its own work.
    with pytest.raises(ApiError) as err:
        worker.post(
            f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/claim",
            {"expected_submission_id": sub["submission"]["id"]},
        )
    assert err.value.code == "reviewer_not_independent"

    nxt = reviewer.get(f"/api/v1/projects/{pid}/next?role=reviewer")
    assert nxt["action"]["activity_id"] == review["id"]
    rc = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/claim",
        {"expected_submission_id": sub["submission"]["id"]},
    )
    decided = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/review",
        {
            "generation": rc["attempt"]["generation"],
            "submission_id": sub["submission"]["id"],
            "decision": "approved",
            "summary": "good",
            "findings": [{"severity": "advisory", "remedy": "rename x"}],
        },
    )
    assert decided["task"]["work_status"] == "waiting_integration"

    # Only an integrator credential records the landing.
    with pytest.raises(ApiError) as err:
        worker.post(
            f"/api/v1/projects/{pid}/workflow-activities/{integration['id']}/landing",
            {"submission_id": sub["submission"]["id"], "landed_revision": SHA_A},
        )
    assert err.value.status == 403
    send_back = f"/api/v1/projects/{pid}/workflow-activities/{integration['id']}/send-back"
    back = {
        "submission_id": sub["submission"]["id"],
        "reason_code": "check_failed",
        "reason": "check unit failed (exit 1)",
    }
    with pytest.raises(ApiError) as err:
        worker.post(send_back, back)  # only the integrator sends a candidate back
    assert err.value.status == 403
    with pytest.raises(ApiError) as err:
        integrator.post(send_back, {**back, "reason_code": "bored"})
    assert err.value.status == 422
    landed = integrator.post(
        f"/api/v1/projects/{pid}/workflow-activities/{integration['id']}/landing",
        {"submission_id": sub["submission"]["id"], "landed_revision": SHA_A},
    )
    assert landed["task"]["work_status"] == "done"
    assert landed["task"]["lifecycle"] == "done"
    with pytest.raises(ApiError) as err:  # a landed candidate cannot be sent back
        integrator.post(send_back, back)
    assert err.value.status == 409

    kinds = [e["kind"] for e in svc.admin.get(f"/api/v1/projects/{pid}/events")["items"]]
    for kind in (
        "task.created",
        "attempt.claimed",
        "attempt.checkpointed",
        "attempt.renewed",
        "submission.created",
        "workflow_activity.claimed",
        "review.decided",
        "integration.completed",
        "task.done",
    ):
        assert kind in kinds


def test_changes_requested_returns_the_task_with_findings(svc: Service) -> None:
    pid = svc.project(review_mode="agent")
    task = svc.task(pid, kind="general")
    worker, reviewer = svc.agent(pid), svc.agent(pid)
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    sub = submit_general(worker, pid, attempt)
    review = sub["activities"][0]
    rc = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/claim",
        {"expected_submission_id": sub["submission"]["id"]},
    )
    with pytest.raises(ApiError) as err:  # an approval carries no required finding
        reviewer.post(
            f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/review",
            {
                "generation": rc["attempt"]["generation"],
                "submission_id": sub["submission"]["id"],
                "decision": "approved",
                "summary": "ok",
                "findings": [{"severity": "required", "remedy": "fix"}],
            },
        )
    assert err.value.status == 422
    out = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/review",
        {
            "generation": rc["attempt"]["generation"],
            "submission_id": sub["submission"]["id"],
            "decision": "changes_requested",
            "summary": "not yet",
            "findings": [{"severity": "required", "remedy": "add a test"}],
        },
    )
    assert out["task"]["work_status"] == "ready"
    detail = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert detail["workflow"]["reviews"][0]["findings"][0]["remedy"] == "add a test"
    # The task can be claimed again, with a higher generation.
    again = claim(worker, pid, svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}"))
    assert again["claim"]["attempt"]["generation"] == 2


def test_general_task_without_review_is_done_on_submission(svc: Service) -> None:
    pid = svc.project(review_mode="none")
    first = svc.task(pid, kind="general")
    second = svc.task(pid, kind="general", depends_on=[first["id"]])
    assert second["work_status"] == "blocked"
    worker = svc.agent(pid)
    attempt = claim(worker, pid, first)["claim"]["attempt"]
    out = submit_general(worker, pid, attempt)
    assert out["task"]["work_status"] == "done"
    assert svc.admin.get(f"/api/v1/projects/{pid}/tasks/{second['id']}")["work_status"] == ("ready")


def test_human_and_both_review_modes(svc: Service) -> None:
    pid = svc.project(review_mode="both")
    task = svc.task(pid, kind="general")
    worker, reviewer = svc.agent(pid), svc.agent(pid)
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    sub = submit_general(worker, pid, attempt)
    kinds = {a["kind"]: a for a in sub["activities"]}
    assert set(kinds) == {"agent_review", "human_review"}
    with pytest.raises(ApiError) as err:  # agents cannot take the human slot
        reviewer.post(
            f"/api/v1/projects/{pid}/workflow-activities/{kinds['human_review']['id']}/claim",
            {"expected_submission_id": sub["submission"]["id"]},
        )
    assert err.value.status == 403
    out = svc.admin.post(
        f"/api/v1/projects/{pid}/workflow-activities/{kinds['human_review']['id']}/review",
        {"submission_id": sub["submission"]["id"], "decision": "approved", "summary": "ok"},
    )
    assert out["task"]["work_status"] == "waiting_review"  # the agent slot is still open
    rc = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{kinds['agent_review']['id']}/claim",
        {"expected_submission_id": sub["submission"]["id"]},
    )
    out = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{kinds['agent_review']['id']}/review",
        {
            "generation": rc["attempt"]["generation"],
            "submission_id": sub["submission"]["id"],
            "decision": "approved",
            "summary": "ok",
        },
    )
    assert out["task"]["work_status"] == "done"


def test_amendment_accepted_replaces_the_criteria(svc: Service) -> None:
    pid = svc.project(review_mode="agent")
    task = svc.task(pid, kind="general", acceptance_criteria=["old criterion"])
    worker, reviewer = svc.agent(pid), svc.agent(pid)
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    with pytest.raises(ApiError) as err:  # evidence must cover the new criteria
        worker.post(
            f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
            {
                "generation": 1,
                "kind": "general",
                "summary": "s",
                "acceptance_evidence": evidence(["old criterion"]),
                "ac_amendment": {"new": ["new criterion"], "rationale": "the old one was wrong"},
            },
        )
    assert err.value.code == "evidence_mismatch"
    sub = worker.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        {
            "generation": 1,
            "kind": "general",
            "summary": "s",
            "acceptance_evidence": evidence(["new criterion"]),
            "ac_amendment": {"new": ["new criterion"], "rationale": "the old one was wrong"},
        },
    )
    act = sub["activities"][0]
    rc = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{act['id']}/claim",
        {"expected_submission_id": sub["submission"]["id"]},
    )
    with pytest.raises(ApiError) as err:
        reviewer.post(
            f"/api/v1/projects/{pid}/workflow-activities/{act['id']}/review",
            {
                "generation": rc["attempt"]["generation"],
                "submission_id": sub["submission"]["id"],
                "decision": "approved",
                "summary": "ok",
            },
        )
    assert err.value.code == "invalid_input"
    out = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{act['id']}/review",
        {
            "generation": rc["attempt"]["generation"],
            "submission_id": sub["submission"]["id"],
            "decision": "approved",
            "summary": "ok",
            "amendment_decision": "accepted",
        },
    )
    assert out["task"]["acceptance_criteria"] == ["new criterion"]
    assert out["task"]["work_status"] == "done"
