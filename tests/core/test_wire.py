"""The shared wire shapes: one definition for the service and the MCP adapter, enums by value."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentc.core import model as m
from agentc.core import wire
from agentc.core.errors import CoordinatorError

EVIDENCE = [{"criterion": "it works", "evidence": "the test passes"}]


def test_enum_fields_take_the_value_and_yield_the_enum() -> None:
    sub = wire.Submission.model_validate(
        {"kind": "code", "summary": "s", "acceptance_evidence": EVIDENCE}
    )
    assert sub.kind is m.TaskKind.CODE
    review = wire.Review.model_validate(
        {
            "decision": "changes_requested",
            "summary": "s",
            "findings": [{"severity": "required", "remedy": "r"}],
            "amendment_decision": "rejected",
        }
    )
    assert review.decision is m.Decision.CHANGES_REQUESTED
    assert review.findings[0].severity is m.Severity.REQUIRED
    assert review.amendment_decision is m.AmendmentDecision.REJECTED
    assert review.model_dump(mode="json")["decision"] == "changes_requested"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"kind": "other"}, "Input should be 'code' or 'general'"),
        ({"kind": "code", "summary": "x" * 8193}, "at most 8192 characters"),
        ({"kind": "code", "acceptance_evidence": []}, "at least 1 item"),
        ({"kind": "code", "extra": 1}, "Extra inputs are not permitted"),
        ({"kind": "code", "base_revision": "HEAD"}, "should match pattern"),
    ],
)
def test_submission_limits(body: dict[str, object], problem: str) -> None:
    full = {"summary": "s", "acceptance_evidence": EVIDENCE, **body}
    with pytest.raises(ValidationError, match=problem):
        wire.Submission.model_validate(full)


def test_a_finding_names_its_file_and_lines() -> None:
    found = wire.Finding.model_validate(
        {"severity": "required", "remedy": "r", "path": "a/b.py", "line": 3, "end_line": 5}
    )
    assert (found.path, found.line, found.end_line) == ("a/b.py", 3, 5)
    assert wire.Finding.model_validate({"severity": "advisory", "remedy": "r"}).path is None


@pytest.mark.parametrize(
    ("place", "problem"),
    [
        ({"line": 3}, "a finding's line needs its path"),
        ({"path": "a", "end_line": 3}, "end_line needs a line at or before it"),
        ({"path": "a", "line": 4, "end_line": 3}, "end_line needs a line at or before it"),
        ({"path": "a", "line": 0}, "greater than or equal to 1"),
        ({"path": "", "line": 1}, "at least 1 character"),
        ({"path": "a", "line": "3"}, "valid integer"),
    ],
)
def test_a_finding_s_place_is_checked(place: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        wire.Finding.model_validate({"severity": "required", "remedy": "r", **place})


def test_the_service_bodies_build_on_the_shared_shapes() -> None:
    from agentc.service import schemas

    assert issubclass(schemas.SubmissionIn, wire.Submission)
    assert issubclass(schemas.ReviewIn, wire.Review)
    # The generation (and the submission) stay first, as before the shapes were shared.
    assert list(schemas.SubmissionIn.model_fields)[:2] == ["generation", "kind"]
    assert list(schemas.ReviewIn.model_fields)[:3] == ["generation", "submission_id", "decision"]


def test_a_refusal_names_its_status() -> None:
    with pytest.raises(TypeError):
        CoordinatorError("claim_conflict", "taken")  # type: ignore[call-arg]
    assert CoordinatorError("claim_conflict", "taken", status=409).status == 409
