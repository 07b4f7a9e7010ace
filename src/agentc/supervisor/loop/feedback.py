"""What the next implementer is told about the task's last submission (issue 32): the
findings of the reviews that requested changes to it, each with its file and lines when the
reviewer put it on the diff, and the integrator's send-back.

Read from the task's workflow with the loop's role credential after the claim; the prompt
quotes it as data (``implementer_prompt``). A task whose newest submission was not sent back
has none. A candidate sent back because a required check failed (fix-on-red) names the checks
as they ran and the candidate the next attempt starts from (``starts_from_candidate``); one
that no longer applies to the target (a conflict) names the candidate to redo on the current
target (``redo_on_target``), whose commits the next attempt's repository holds.
"""

from __future__ import annotations

from typing import Any

from agentc.client import reads
from agentc.client.ops import Agent
from agentc.client.reads import Activity, Submission, Workflow

FINDING_KEYS = ("severity", "remedy", "evidence", "path", "line", "end_line")
CHECK_KEYS = ("name", "command", "outcome", "exit_code", "tail", "flaky")
MAX_REVIEWS = 5


def of_workflow(flow: Workflow) -> dict[str, Any] | None:
    """The feedback on the newest submission of a task's workflow view, or None."""
    subs = flow["submissions"]
    if not subs or not subs[0]["superseded_at"]:
        return None
    newest = subs[0]["id"]
    reviews = [
        {
            "reviewer": r["reviewer_kind"],
            "summary": r["summary"],
            "findings": [
                {k: f[k] for k in FINDING_KEYS if f.get(k) not in (None, "")} for f in r["findings"]
            ],
        }
        for r in flow["reviews"]
        if r["submission_id"] == newest and r["decision"] == "changes_requested"
    ][:MAX_REVIEWS]
    integration = next(
        (a for a in flow["activities"] if a["submission_id"] == newest and a.get("sent_back")),
        None,
    )
    if not reviews and integration is None:
        return None
    found: dict[str, Any] = {"submission_id": newest, "reviews": reviews}
    if integration is not None:
        sent_back = integration.get("sent_back") or {}
        found["sent_back_by_integrator"] = sent_back
        code = sent_back.get("reason_code")
        if code == "check_failed":
            found.update(_fix_round(subs[0], integration))
        elif code == "conflict" and _candidate(subs[0]):
            found["redo_on_target"] = _candidate(subs[0])
    return found


def _candidate(sub: Submission) -> dict[str, str] | None:
    """The submission's candidate ref, candidate and base revisions (None: it names none)."""
    ref, revision, base = sub["candidate_ref"], sub["candidate_revision"], sub["base_revision"]
    if not (ref and revision and base):
        return None
    return {"candidate_ref": ref, "candidate_revision": revision, "base_revision": base}


def _fix_round(sub: Submission, integration: Activity) -> dict[str, Any]:
    """A candidate that failed a required check: the checks as they ran (each with its
    command, exit status and output's end), and the candidate the next attempt starts from
    (its worktree is that candidate, on the same base)."""
    checks = [
        {k: c[k] for k in CHECK_KEYS if c.get(k) not in (None, "")}
        for c in integration.get("checks") or []
    ]
    start = _candidate(sub)
    return {"checks": checks, "starts_from_candidate": start} if start else {"checks": checks}


def read(client: Agent, task_id: str) -> dict[str, Any] | None:
    """The task's feedback, read from the coordinator."""
    return of_workflow(reads.workflow(client, task_id))
