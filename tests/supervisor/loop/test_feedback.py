"""The feedback the next implementer reads: the sent-back submission's findings (pure)."""

from __future__ import annotations

from typing import Any

from agentc.client.reads import Workflow
from agentc.supervisor.loop.feedback import of_workflow
from tests.client.kit import workflow_view

NEWER = "2026-01-01T00:00:00Z"
PLACED = {"severity": "required", "remedy": "r", "evidence": "", "path": "a.py", "line": 3}


def flow(
    superseded: bool = True,
    reviews: list[dict[str, Any]] | None = None,
    activities: list[dict[str, Any]] | None = None,
    git: dict[str, str] | None = None,
) -> Workflow:
    return workflow_view(
        submissions=[
            {
                "id": "sub_2",
                "superseded_at": "2026-01-01T00:00:00Z" if superseded else None,
                **(git or {}),
            },
            {"id": "sub_1", "superseded_at": "2025-12-01T00:00:00Z"},
        ],
        reviews=REVIEWS if reviews is None else reviews,
        activities=activities,
    )


REVIEWS: list[dict[str, Any]] = [
    {
        "submission_id": "sub_2",
        "decision": "changes_requested",
        "summary": "fix",
        "reviewer_kind": "human",
        "findings": [PLACED],
    },
    {"submission_id": "sub_2", "decision": "approved", "summary": "ok", "findings": []},
    {"submission_id": "sub_1", "decision": "changes_requested", "summary": "old"},
]


def test_the_newest_submission_s_requests_with_their_places() -> None:
    found = of_workflow(flow())
    assert found == {
        "submission_id": "sub_2",
        "reviews": [
            {
                "reviewer": "human",
                "summary": "fix",
                "findings": [{"severity": "required", "remedy": "r", "path": "a.py", "line": 3}],
            }
        ],
    }


def test_a_send_back_is_feedback_and_a_live_submission_has_none() -> None:
    back = {"reason_code": "check_failed", "reason": "tests", "log_tail": "E"}
    activities = [{"submission_id": "sub_2", "kind": "integration", "sent_back": back}]
    found = of_workflow(flow(reviews=[], activities=activities))
    assert found == {
        "submission_id": "sub_2",
        "reviews": [],
        "sent_back_by_integrator": back,
        "checks": [],  # (the submission names no candidate here: nothing to start from)
    }
    assert of_workflow(flow(superseded=False)) is None
    assert of_workflow(flow(reviews=[])) is None
    assert of_workflow(workflow_view()) is None


def test_a_red_candidate_is_where_the_next_attempt_starts() -> None:
    back = {"reason_code": "check_failed", "reason": "check unit failed (exit 3)", "log_tail": "E"}
    checks = [
        {"name": "lint", "outcome": "passed", "exit_code": 0, "command": "ruff", "tail": ""},
        {"name": "unit", "outcome": "failed", "exit_code": 3, "command": "pytest", "tail": "E"},
    ]
    activities = [{"submission_id": "sub_2", "sent_back": back, "checks": checks}]
    git = {"candidate_ref": "refs/c/t/l", "candidate_revision": "c" * 40, "base_revision": "b" * 40}
    data = flow(reviews=[], activities=activities, git=git)
    found = of_workflow(data)
    assert found is not None and found["starts_from_candidate"] == git
    assert found["checks"] == [
        {"name": "lint", "command": "ruff", "outcome": "passed", "exit_code": 0},
        {"name": "unit", "command": "pytest", "outcome": "failed", "exit_code": 3, "tail": "E"},
    ]
    conflict = {**back, "reason_code": "conflict"}  # only a failed check starts from it
    data = flow(reviews=[], activities=[{"submission_id": "sub_2", "sent_back": conflict}], git=git)
    redo = of_workflow(data) or {}
    assert "starts_from_candidate" not in redo and "checks" not in redo
    assert redo["redo_on_target"] == git  # a conflict's candidate is to be re-applied
