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

from agentc.client.ops import Agent

FINDING_KEYS = ("severity", "remedy", "evidence", "path", "line", "end_line")
CHECK_KEYS = ("name", "command", "outcome", "exit_code", "tail", "flaky")
MAX_REVIEWS = 5


def of_workflow(flow: dict[str, Any]) -> dict[str, Any] | None:
    """The feedback on the newest submission of a task's workflow view, or None."""
    subs = [s for s in flow.get("submissions") or [] if isinstance(s, dict)]
    if not subs or not subs[0].get("superseded_at"):
        return None
    newest = subs[0]["id"]
    reviews = [
        {
            "reviewer": r.get("reviewer_kind"),
            "summary": r.get("summary", ""),
            "findings": [
                {k: f[k] for k in FINDING_KEYS if f.get(k) not in (None, "")}
                for f in r.get("findings") or []
                if isinstance(f, dict)
            ],
        }
        for r in flow.get("reviews") or []
        if isinstance(r, dict)
        and r.get("submission_id") == newest
        and r.get("decision") == "changes_requested"
    ][:MAX_REVIEWS]
    integration = next(
        (
            a
            for a in flow.get("activities") or []
            if isinstance(a, dict) and a.get("submission_id") == newest and a.get("sent_back")
        ),
        None,
    )
    if not reviews and integration is None:
        return None
    found: dict[str, Any] = {"submission_id": newest, "reviews": reviews}
    if integration is not None:
        found["sent_back_by_integrator"] = integration["sent_back"]
        code = integration["sent_back"].get("reason_code")
        if code == "check_failed":
            found.update(_fix_round(subs[0], integration))
        elif code == "conflict" and _candidate(subs[0]):
            found["redo_on_target"] = _candidate(subs[0])
    return found


def _candidate(sub: dict[str, Any]) -> dict[str, str] | None:
    """The submission's candidate ref, candidate and base revisions (None: it names none)."""
    start = {k: sub.get(k) for k in ("candidate_ref", "candidate_revision", "base_revision")}
    if not all(isinstance(v, str) and v for v in start.values()):
        return None
    return {k: str(v) for k, v in start.items()}


def _fix_round(sub: dict[str, Any], integration: dict[str, Any]) -> dict[str, Any]:
    """A candidate that failed a required check: the checks as they ran (each with its
    command, exit status and output's end), and the candidate the next attempt starts from
    (its worktree is that candidate, on the same base)."""
    checks = [
        {k: c[k] for k in CHECK_KEYS if c.get(k) not in (None, "")}
        for c in integration.get("checks") or []
        if isinstance(c, dict)
    ]
    start = _candidate(sub)
    return {"checks": checks, "starts_from_candidate": start} if start else {"checks": checks}


def read(client: Agent, task_id: str) -> dict[str, Any] | None:
    """The task's feedback, read from the coordinator."""
    flow = client.get(client.project(f"/tasks/{task_id}/workflow"))
    return of_workflow(flow) if isinstance(flow, dict) else None
