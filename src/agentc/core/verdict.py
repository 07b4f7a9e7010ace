"""The reviewer's verdict: schema, strict parse, approval checks, and the posted review body.

A reviewer's final message is the verdict only: ``decision`` (``approve`` | ``request_changes``),
``summary``, ``findings`` (each a string, or an object ``{remedy, path, line, end_line}`` putting
it on the change's lines: the place keys optional, by the rule of the wire's ``Finding``),
``criteria_evidence`` (``{criterion, evidence}`` for each acceptance criterion, verbatim) and
``amendment_decision`` (``accepted`` | ``rejected`` | null).
Anything else (an unknown key, a wrong type) makes the verdict invalid: the review is released,
never decided on a guess. An approval must carry evidence for every criterion the task is judged
by (the amended set when the amendment is accepted) and, when the submission proposes an
amendment, decide it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentc.core.errors import AgentcError
from agentc.core.rules import finding_place_problem

MAX_FINDINGS = 100
MAX_FINDING_CHARS = 4000
MAX_SUMMARY_CHARS = 12000
MAX_RELEASE_CHARS = 4000
DEFAULT_SUMMARY = "Supervised review."

VERDICT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "decision",
        "summary",
        "findings",
        "criteria_evidence",
        "amendment_decision",
    ],
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "request_changes"]},
        "summary": {"type": "string"},
        "findings": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["remedy", "path", "line", "end_line"],
                        "properties": {
                            "remedy": {"type": "string"},
                            "path": {"type": ["string", "null"]},
                            "line": {"type": ["integer", "null"], "minimum": 1},
                            "end_line": {"type": ["integer", "null"], "minimum": 1},
                        },
                    },
                ]
            },
        },
        "criteria_evidence": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["criterion", "evidence"],
                "properties": {
                    "criterion": {"type": "string"},
                    "evidence": {"type": "string"},
                },
            },
        },
        "amendment_decision": {
            "type": ["string", "null"],
            "enum": ["accepted", "rejected", None],
        },
    },
}

_KEYS = frozenset(VERDICT_SCHEMA["properties"])
_REQUIRED = frozenset({"decision", "findings", "criteria_evidence"})


class VerdictError(AgentcError, ValueError):
    """The reviewer's output is not a valid verdict; the message says why (one line)."""


@dataclass(frozen=True)
class Finding:
    """A verdict's finding; with ``path`` (and ``line`` to ``end_line``) it is on the change."""

    remedy: str
    path: str | None = None
    line: int | None = None
    end_line: int | None = None


_FINDING_KEYS = frozenset({"remedy", "path", "line", "end_line"})


@dataclass(frozen=True)
class Verdict:
    decision: Literal["approve", "request_changes"]
    summary: str
    findings: tuple[Finding, ...]
    criteria_evidence: tuple[tuple[str, str], ...]
    amendment_decision: Literal["accepted", "rejected"] | None


def _findings(value: object) -> tuple[Finding, ...]:
    if not isinstance(value, list):
        raise VerdictError("findings must be a list of strings or objects")
    return tuple(_finding(i, item) for i, item in enumerate(value))


def _finding(i: int, item: object) -> Finding:
    if isinstance(item, str):
        return Finding(item)
    if (
        not isinstance(item, dict)
        or not set(item) <= _FINDING_KEYS
        or not isinstance(item.get("remedy"), str)
    ):
        raise VerdictError(
            f"findings[{i}] must be a string or an object of remedy (a string) and optionally "
            "path, line and end_line"
        )
    path, line, end_line = item.get("path"), item.get("line"), item.get("end_line")
    problem = finding_place_problem(path, line, end_line)
    if problem:
        raise VerdictError(f"findings[{i}]: {problem}")
    return Finding(item["remedy"], path, line, end_line)  # checked by the rule above


def parse_verdict(obj: object) -> Verdict:
    """A verdict from its JSON object; unknown keys and wrong types are refused."""
    if not isinstance(obj, dict):
        raise VerdictError("the verdict is not a JSON object")
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise VerdictError(f"the verdict has unknown keys: {', '.join(unknown)}")
    missing = sorted(_REQUIRED - set(obj))
    if missing:
        raise VerdictError(f"the verdict lacks: {', '.join(missing)}")
    decision = obj["decision"]
    if decision not in ("approve", "request_changes"):
        raise VerdictError(f"decision must be approve or request_changes, not {decision!r}")
    summary = obj.get("summary", "")
    if not isinstance(summary, str):
        raise VerdictError("summary must be a string")
    evidence: list[tuple[str, str]] = []
    entries = obj["criteria_evidence"]
    if not isinstance(entries, list):
        raise VerdictError("criteria_evidence must be a list")
    for i, entry in enumerate(entries):
        if (
            not isinstance(entry, dict)
            or set(entry) != {"criterion", "evidence"}
            or not all(isinstance(entry[k], str) for k in entry)
        ):
            raise VerdictError(
                f"criteria_evidence[{i}] must be an object of two strings: criterion, evidence"
            )
        evidence.append((entry["criterion"], entry["evidence"]))
    amendment = obj.get("amendment_decision")
    if amendment not in ("accepted", "rejected", None):
        raise VerdictError(
            f"amendment_decision must be accepted, rejected or null, not {amendment!r}"
        )
    return Verdict(
        decision=decision,
        summary=summary,
        findings=_findings(obj["findings"]),
        criteria_evidence=tuple(evidence),
        amendment_decision=amendment,
    )


def verdict_from_text(structured: object, text: str | None) -> Verdict:
    """The verdict from a harness's structured output, else its final message parsed as JSON."""
    if structured is not None:
        return parse_verdict(structured)
    if not text or not text.strip():
        raise VerdictError("the reviewer gave no final message")
    body = text.strip()
    if body.startswith("```"):  # a fenced block: take what is inside the fence
        body = body.strip("`").removeprefix("json").strip()
    try:
        return parse_verdict(json.loads(body))
    except ValueError as exc:
        if isinstance(exc, VerdictError):
            raise
        raise VerdictError("the reviewer's final message is not JSON") from None


def _norm(text: str) -> str:
    return " ".join(text.split())


def check_verdict(
    verdict: Verdict, criteria: Sequence[str], amended: Sequence[str] | None = None
) -> list[str]:
    """Problems that make the verdict unpostable (empty when it may be posted).

    ``criteria`` are the task's acceptance criteria; ``amended`` the submission's proposed set
    when it carries an amendment.
    """
    problems: list[str] = []
    if amended is not None and verdict.decision == "approve" and not verdict.amendment_decision:
        problems.append("the submission proposes an amendment and the approval does not decide it")
    if verdict.decision != "approve":
        return problems
    if not verdict.criteria_evidence:
        problems.append("an approval needs evidence for every acceptance criterion")
        return problems
    for criterion, evidence in verdict.criteria_evidence:
        if not criterion.strip() or not evidence.strip():
            problems.append("a criterion or its evidence is blank")
            break
    judged = (
        amended if amended is not None and verdict.amendment_decision == "accepted" else criteria
    )
    given = {_norm(criterion) for criterion, _ in verdict.criteria_evidence}
    for criterion in judged:
        if _norm(criterion) not in given:
            problems.append(f"no evidence for the criterion {criterion!r}")
    return problems


def review_body(verdict: Verdict, *, submission_id: str, has_amendment: bool) -> dict[str, Any]:
    """The coordinator's review body for a checked verdict."""
    approved = verdict.decision == "approve"
    severity = "advisory" if approved else "required"
    findings = [
        {"severity": severity, "remedy": f.remedy.strip()[:MAX_FINDING_CHARS]}
        | {key: value for key in ("path", "line", "end_line") if (value := getattr(f, key))}
        for f in verdict.findings
        if f.remedy.strip()
    ][:MAX_FINDINGS]
    summary = verdict.summary.strip() or DEFAULT_SUMMARY
    if verdict.criteria_evidence:
        lines = "".join(f"\n- {c}: {e}" for c, e in verdict.criteria_evidence)
        summary += "\n\nCriteria evidence:" + lines
    body: dict[str, Any] = {
        "submission_id": submission_id,
        "decision": "approved" if approved else "changes_requested",
        "summary": summary[:MAX_SUMMARY_CHARS],
        "findings": findings,
    }
    decision = verdict.amendment_decision
    if has_amendment and decision and not (decision == "accepted" and not approved):
        body["amendment_decision"] = decision
    return body


def release_summary(reason: str) -> str:
    """The summary a review is released with when no verdict could be posted."""
    text = f"agentc-supervisor posted no verdict: {reason}. The review is queued again."
    return text[:MAX_RELEASE_CHARS]
