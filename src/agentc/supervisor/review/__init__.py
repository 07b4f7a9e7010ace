"""Reviewer launches: the verdict a reviewer harness must produce, and how it is judged.

:mod:`.verdict` holds the verdict's JSON schema (handed to Claude as ``--json-schema`` and to
Codex as ``--output-schema``), its strict parser, the approval checks (evidence for every
acceptance criterion, an amendment decided) and the review body posted to the coordinator.
Pure: no I/O.
"""

from agentc.supervisor.review.verdict import (
    VERDICT_SCHEMA,
    Finding,
    Verdict,
    VerdictError,
    check_verdict,
    parse_verdict,
    release_summary,
    review_body,
    verdict_from_text,
)

__all__ = [
    "VERDICT_SCHEMA",
    "Finding",
    "Verdict",
    "VerdictError",
    "check_verdict",
    "parse_verdict",
    "release_summary",
    "review_body",
    "verdict_from_text",
]
