"""What the integrator asks the coordinator before it lands: which token-shaped strings a change
adds are this coordinator's secrets, a landing's provenance, and a hold for a person."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.service.console.kit import browse_as
from tests.service.kit import SHA_A, ApiError, Caller, Clock, Service, claim, submit_code


def _approved(
    svc: Service, pid: str | None = None, title: str = "a task"
) -> tuple[str, Caller, Caller, dict[str, Any]]:
    """A code task (in a new project, or ``pid``) whose submission an agent approved:
    (project, worker, integrator, the submission's answer)."""
    pid = pid or svc.project(review_mode="agent")
    task = svc.task(pid, title=title, acceptance_criteria=["it works"])
    worker, reviewer = svc.agent(pid), svc.agent(pid)
    integrator = svc.agent(pid, credential_class="integrator", session=False)
    sub = submit_code(worker, pid, claim(worker, pid, task)["claim"]["attempt"])
    review = next(a for a in sub["activities"] if a["kind"] == "agent_review")
    rc = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/claim",
        {"expected_submission_id": sub["submission"]["id"]},
    )
    reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/review",
        {
            "generation": rc["attempt"]["generation"],
            "submission_id": sub["submission"]["id"],
            "decision": "approved",
            "summary": "good",
        },
    )
    return pid, worker, integrator, sub


def _integration(sub: dict[str, Any]) -> str:
    return str(next(a["id"] for a in sub["activities"] if a["kind"] == "integration"))


def test_known_secrets_names_only_this_coordinators_secrets(svc: Service) -> None:
    pid, worker, integrator, sub = _approved(svc)
    path = f"/api/v1/projects/{pid}/workflow-activities/{_integration(sub)}/known-secrets"
    token = worker.issued["token"]
    mine = hashlib.sha256(token.encode()).hexdigest()
    other = hashlib.sha256(b"not a secret").hexdigest()
    found = integrator.get(f"{path}?verifiers={other},{mine}")
    assert found == {
        "known": [{"verifier": mine, "kind": "an agent credential of this coordinator"}]
    }
    assert integrator.get(f"{path}?verifiers={other}") == {"known": []}
    for bad in ("", "xyz", mine.upper(), ",".join([other] * 65), f"{other},"):
        with pytest.raises(ApiError) as err:
            integrator.get(f"{path}?verifiers={bad}")
        assert (err.value.status, err.value.code) == (400, "invalid_request"), bad
    with pytest.raises(ApiError) as err:  # only the integrator asks
        worker.get(f"{path}?verifiers={mine}")
    assert err.value.status == 403


def test_provenance_names_the_attempt_and_each_review(svc: Service) -> None:
    pid, _worker, integrator, sub = _approved(svc)
    act = _integration(sub)
    got = integrator.get(f"/api/v1/projects/{pid}/workflow-activities/{act}/provenance")
    assert got["attempt_id"] == sub["submission"]["attempt_id"]
    assert (got["launch_id"], got["prompt_sha256"]) == (None, None)  # no steps recorded
    assert got["ledger"] == {"cost_rows": 0, "harnesses": [], "models": [], "launches": []}
    [review] = got["reviews"]
    assert review["decision"] == "approved" and review["reviewer_kind"] == "agent"
    assert review["reviewer_name"]
    other = next(a["id"] for a in sub["activities"] if a["kind"] == "agent_review")
    with pytest.raises(ApiError) as err:
        integrator.get(f"/api/v1/projects/{pid}/workflow-activities/{other}/provenance")
    assert (err.value.status, err.value.code) == (404, "record_not_found")


def test_a_hold_waits_for_a_person_once(svc: Service) -> None:
    pid, worker, integrator, sub = _approved(svc)
    act = _integration(sub)
    hold = f"/api/v1/projects/{pid}/workflow-activities/{act}/hold"
    body = {"submission_id": sub["submission"]["id"], "reason": "the pre-landing scan found 1"}
    with pytest.raises(ApiError) as err:
        worker.post(hold, body)
    assert err.value.status == 403
    held = integrator.post(hold, body)
    assert held["task"]["work_status"] == "waiting_review"
    assert held["activity"]["state"] == "waiting"
    assert held["activity"]["held"]["reason"] == "the pre-landing scan found 1"
    with pytest.raises(ApiError) as err:  # not queued any more: a person's review is pending
        integrator.post(hold, body)
    assert (err.value.status, err.value.code) == (409, "reviews_pending")
    flow = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{sub['task']['id']}/workflow")
    [review] = [a for a in flow["activities"] if a["kind"] == "human_review"]
    assert review["state"] == "queued"
    with pytest.raises(ApiError) as err:  # an agent cannot take a person's slot
        svc.agent(pid).post(
            f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/claim",
            {"expected_submission_id": sub["submission"]["id"]},
        )
    assert err.value.status == 403
    decided = svc.admin.post(
        f"/api/v1/projects/{pid}/workflow-activities/{review['id']}/review",
        {"submission_id": sub["submission"]["id"], "decision": "approved", "summary": "read it"},
    )
    assert decided["task"]["work_status"] == "waiting_integration"
    with pytest.raises(ApiError) as err:  # judged once: the integrator may not hold it again
        integrator.post(hold, body)
    assert (err.value.status, err.value.code) == (409, "already_held")
    landed = integrator.post(
        f"/api/v1/projects/{pid}/workflow-activities/{act}/landing",
        {"submission_id": sub["submission"]["id"], "landed_revision": SHA_A},
    )
    assert landed["task"]["work_status"] == "done"
    assert landed["activity"]["held"]["reason"] == "the pre-landing scan found 1"


def test_fix_rounds_are_a_project_policy(svc: Service) -> None:
    pid = svc.project(review_mode="agent")
    project = svc.admin.get(f"/api/v1/projects/{pid}")
    assert project["policy"]["fix_rounds"] == 2
    changed = svc.admin.patch(
        f"/api/v1/projects/{pid}/policy",
        {"expected_revision": project["policy"]["revision"], "fix_rounds": 0},
    )
    assert changed["policy"]["fix_rounds"] == 0
    for bad in (-1, 21):
        with pytest.raises(ApiError) as err:
            svc.admin.patch(
                f"/api/v1/projects/{pid}/policy",
                {"expected_revision": changed["policy"]["revision"], "fix_rounds": bad},
            )
        assert err.value.status == 422


def test_the_landing_queue_is_in_approval_order_on_the_api_and_the_board(
    svc: Service, clock: Clock
) -> None:
    pid, _w, integrator, first = _approved(svc, title="approved first")
    clock.advance(5)
    _p, _w2, _i, second = _approved(svc, pid, title="approved <second>")
    queue = integrator.get(f"/api/v1/projects/{pid}/integration/queue")
    assert [i["task_id"] for i in queue["items"]] == [
        first["task"]["id"],
        second["task"]["id"],
    ]
    head = queue["items"][0]
    assert head["position"] == 1 and head["candidate_revision"] == SHA_A
    assert head["held"] is False and queue["target_branch"] == "main"
    browse_as(svc, svc.admin)
    html = svc.client.get(f"/console/projects/{pid}").text
    board = html[html.index('id="landing-queue"') :]
    assert board.index("approved first") < board.index("approved &lt;second&gt;")
    # Landed, it leaves the queue.
    act = _integration(first)
    integrator.post(
        f"/api/v1/projects/{pid}/workflow-activities/{act}/landing",
        {"submission_id": first["submission"]["id"], "landed_revision": SHA_A},
    )
    left = integrator.get(f"/api/v1/projects/{pid}/integration/queue")["items"]
    assert [i["task_id"] for i in left] == [second["task"]["id"]]
