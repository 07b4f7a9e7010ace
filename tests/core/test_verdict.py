"""The reviewer verdict: strict parsing, approval checks and the posted review body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from agentc.core.verdict import (
    VERDICT_SCHEMA,
    VerdictError,
    check_verdict,
    parse_verdict,
    release_summary,
    review_body,
    verdict_from_text,
)
from agentc.core.wire import Finding, Review
from agentc.supervisor.harness.events import summarize

CRITERIA = ["The CLI prints the version", "Tests cover the flag"]


def verdict(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "decision": "approve",
        "summary": "Looks right.",
        "findings": ["rename x"],
        "criteria_evidence": [
            {"criterion": "The CLI prints the version", "evidence": "ran --version"},
            {"criterion": "Tests  cover the flag", "evidence": "test_version passes"},
        ],
        "amendment_decision": None,
    }
    base.update(overrides)
    return base


def test_a_complete_approval_passes_and_posts_advisory_findings() -> None:
    v = parse_verdict(verdict())
    assert check_verdict(v, CRITERIA) == []
    body = review_body(v, submission_id="sub1", has_amendment=False)
    assert body["decision"] == "approved" and body["submission_id"] == "sub1"
    assert body["findings"] == [{"severity": "advisory", "remedy": "rename x"}]
    assert body["summary"].startswith("Looks right.\n\nCriteria evidence:\n- The CLI prints")
    assert "amendment_decision" not in body


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "not a JSON object"),
        (verdict(extra=1), "unknown keys: extra"),
        ({"decision": "approve"}, "lacks: criteria_evidence, findings"),
        (verdict(decision="lgtm"), "decision must be"),
        (verdict(findings="x"), "findings must be a list of strings or objects"),
        (verdict(findings=[1]), r"findings\[0\] must be a string or an object"),
        (verdict(findings=[{"path": "a.py"}]), r"findings\[0\] must be a string or an object"),
        (verdict(findings=[{"remedy": "x", "col": 1}]), r"findings\[0\] must be"),
        (verdict(criteria_evidence=[{"criterion": "a"}]), r"criteria_evidence\[0\]"),
        (verdict(criteria_evidence=[{"criterion": "a", "evidence": 2}]), r"\[0\]"),
        (verdict(amendment_decision="maybe"), "amendment_decision must be"),
        (verdict(summary=3), "summary must be a string"),
    ],
)
def test_invalid_verdicts_are_refused_with_the_reason(obj: object, message: str) -> None:
    with pytest.raises(VerdictError, match=message):
        parse_verdict(obj)


def test_an_approval_missing_a_criterion_or_with_blank_evidence_is_not_posted() -> None:
    partial = parse_verdict(verdict(criteria_evidence=verdict()["criteria_evidence"][:1]))
    assert check_verdict(partial, CRITERIA) == [
        "no evidence for the criterion 'Tests cover the flag'"
    ]
    empty = parse_verdict(verdict(criteria_evidence=[]))
    assert check_verdict(empty, CRITERIA) == [
        "an approval needs evidence for every acceptance criterion"
    ]
    blank = [{"criterion": c, "evidence": " "} for c in CRITERIA]
    assert "blank" in check_verdict(parse_verdict(verdict(criteria_evidence=blank)), CRITERIA)[0]


def test_request_changes_needs_no_evidence_and_posts_required_findings() -> None:
    v = parse_verdict(verdict(decision="request_changes", criteria_evidence=[], summary=""))
    assert check_verdict(v, CRITERIA) == []
    body = review_body(v, submission_id="s", has_amendment=False)
    assert body["decision"] == "changes_requested" and body["summary"] == "Supervised review."
    assert body["findings"] == [{"severity": "required", "remedy": "rename x"}]


def test_amendments_must_be_decided_and_an_accepted_one_changes_the_judged_set() -> None:
    amended = ["The CLI prints the version and the commit"]
    undecided = parse_verdict(verdict())
    assert "does not decide it" in check_verdict(undecided, CRITERIA, amended)[0]
    accepted = parse_verdict(
        verdict(
            amendment_decision="accepted",
            criteria_evidence=[{"criterion": amended[0], "evidence": "ran it"}],
        )
    )
    assert check_verdict(accepted, CRITERIA, amended) == []
    body = review_body(accepted, submission_id="s", has_amendment=True)
    assert body["amendment_decision"] == "accepted"
    rejected_changes = parse_verdict(
        verdict(decision="request_changes", amendment_decision="accepted")
    )
    assert "amendment_decision" not in review_body(
        rejected_changes, submission_id="s", has_amendment=True
    )


def test_a_finding_on_lines_is_posted_with_its_place() -> None:
    placed = [
        {"remedy": "off by one", "path": "src/a.py", "line": 3, "end_line": 5},
        {"remedy": "name it", "path": "b.py", "line": 7, "end_line": None},
        {"remedy": "the whole file", "path": "c.py", "line": None, "end_line": None},
        {"remedy": "general"},
        "a string, as before",
    ]
    body = review_body(
        parse_verdict(verdict(decision="request_changes", findings=placed)),
        submission_id="s",
        has_amendment=False,
    )
    assert body["findings"] == [
        {"severity": "required", "remedy": "off by one", "path": "src/a.py", "line": 3,
         "end_line": 5},
        {"severity": "required", "remedy": "name it", "path": "b.py", "line": 7},
        {"severity": "required", "remedy": "the whole file", "path": "c.py"},
        {"severity": "required", "remedy": "general"},
        {"severity": "required", "remedy": "a string, as before"},
    ]  # fmt: skip
    # What the supervisor posts is what the coordinator's own shape accepts.
    Review.model_validate({k: body[k] for k in ("decision", "summary", "findings")})


@pytest.mark.parametrize(
    ("place", "message"),
    [
        ({"line": 3}, "a finding's line needs its path"),
        ({"path": "a", "end_line": 3}, "end_line needs a line at or before it"),
        ({"path": "a", "line": 4, "end_line": 3}, "end_line needs a line at or before it"),
        ({"path": "a", "line": 0}, "line must be a whole number from 1"),
        ({"path": "a", "line": True}, "line must be a whole number from 1"),
        ({"path": "a", "line": "3"}, "line must be a whole number from 1"),
        ({"path": "a", "line": 1, "end_line": 2**62 + 1}, "end_line must be a whole number"),
        ({"path": ""}, "path must be 1-4096 characters"),
        ({"path": "a\x00b"}, "none of them NUL"),
        ({"path": "p" * 4097}, "path must be 1-4096 characters"),
        ({"path": 5}, "path must be 1-4096 characters"),
    ],
)
def test_a_misplaced_finding_is_refused_by_the_wire_rule(
    place: dict[str, object], message: str
) -> None:
    """The verdict's placement rule is the wire's: both refuse the same places, the same way."""
    with pytest.raises(VerdictError, match=message):
        parse_verdict(verdict(findings=[{"remedy": "x", **place}]))
    with pytest.raises(ValidationError) as refused:  # the field types refuse the others first
        Finding.model_validate({"severity": "required", "remedy": "x", **place})
    assert "needs" not in message or message in str(refused.value)


def test_findings_are_bounded_and_blank_ones_dropped() -> None:
    v = parse_verdict(verdict(findings=[" ", *["f" * 5000] * 150]))
    body = review_body(v, submission_id="s", has_amendment=False)
    assert len(body["findings"]) == 100
    assert all(len(f["remedy"]) == 4000 for f in body["findings"])


def test_verdict_from_a_real_claude_structured_output_stream_shape() -> None:
    data = json.dumps(verdict())
    stream = (
        json.dumps({"type": "result", "structured_output": verdict(), "result": data}) + "\n"
    ).encode()
    s = summarize("claude", stream)
    assert verdict_from_text(s.structured_output, s.final_text) == parse_verdict(verdict())
    assert verdict_from_text(None, f"```json\n{data}\n```") == parse_verdict(verdict())


@pytest.mark.parametrize("text", [None, "", "I approve!", "[1]"])
def test_a_final_message_that_is_no_verdict_is_refused(text: str | None) -> None:
    with pytest.raises(VerdictError):
        verdict_from_text(None, text)


def test_schema_names_every_key_the_parser_accepts() -> None:
    assert set(VERDICT_SCHEMA["required"]) == set(VERDICT_SCHEMA["properties"])
    parse_verdict({key: verdict()[key] for key in VERDICT_SCHEMA["required"]})
    placed = VERDICT_SCHEMA["properties"]["findings"]["items"]["anyOf"][1]
    assert set(placed["required"]) == set(placed["properties"])
    parse_verdict(verdict(findings=[dict.fromkeys(placed["required"]) | {"remedy": "x"}]))


def test_release_summary_is_bounded() -> None:
    assert release_summary("x").startswith("agentc-supervisor posted no verdict: x.")
    assert len(release_summary("y" * 10_000)) == 4000
