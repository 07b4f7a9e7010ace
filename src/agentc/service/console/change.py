"""The change page: a submission's patch (file list, hunks, line numbers, highlighting, unified
or side by side, large files folded), its landing and checks, its reviews' findings on their
lines, what changed since the task's last reviewed submission when this one amends it, and
beside it the criteria with the submission's evidence and, while a person's review is queued,
the review form with line comments (each becomes a finding with file and lines)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.responses import Response

from agentc.core.model import ActivityKind, ActivityState
from agentc.service.console import diff, interdiff
from agentc.service.console.render import Viewer, page, router
from agentc.service.work import launch_log
from agentc.service.work.artifacts import patch_view
from agentc.service.work.refusals import not_found
from agentc.service.work.views import project_row, project_view, task_detail, task_row
from agentc.store import artifacts
from agentc.store.tx import Tx

PERSON_REVIEWS = (ActivityKind.HUMAN_REVIEW, ActivityKind.EITHER_REVIEW)
COMMENT_ROWS = 5  # line comments the form offers at once


@router.get("/console/projects/{project_id}/tasks/{task_id}/submissions/{submission_id}")
async def change_page(
    request: Request, project_id: str, task_id: str, submission_id: str, view: str = ""
) -> Response:
    split = view == "split"

    def build(tx: Tx, _v: Viewer) -> tuple[str, dict[str, Any]]:
        project = project_view(project_row(tx.conn, project_id))
        task = task_detail(tx.conn, task_row(tx.conn, project_id, task_id), tx.now)
        flow = task["workflow"]
        sub = next((s for s in flow["submissions"] if s["id"] == submission_id), None)
        if sub is None:
            raise not_found("submission", submission_id)
        row = artifacts.of_submission(tx.conn, submission_id, "patch")
        change = patch_view(row) if row is not None else None
        files, matched = diff.parse(change["files"], change["patch"]) if change else ([], True)
        reviews = [r for r in flow["reviews"] if r["submission_id"] == submission_id]
        for r in reviews:  # read for this page: each finding learns its review (and place)
            for f in r["findings"]:
                for key in ("path", "line", "end_line", "anchor", "evidence"):
                    f.setdefault(key, None)  # a finding recorded before they existed
                f.update(reviewer_kind=r["reviewer_kind"], decision=r["decision"])
        notes = [f for r in reversed(reviews) for f in r["findings"]]
        elsewhere = diff.place(files, notes) if matched else notes
        since = since_review(tx, flow, sub, change)
        landing = next(
            (
                a
                for a in flow["activities"]
                if a["submission_id"] == submission_id and a["kind"] == "integration"
            ),
            None,
        )
        return "change.html", {
            "project": project,
            "task": task,
            "submission": sub,
            "change": change,
            "files": files,
            "matched": matched,
            "split": split,
            "rows": diff.side_by_side,
            "landing": landing,
            "reviews": reviews,
            "elsewhere": elsewhere,
            "reviewable": [
                a
                for a in flow["activities"]
                if a["submission_id"] == submission_id
                and a["kind"] in PERSON_REVIEWS
                and a["state"] == ActivityState.QUEUED
            ],
            "since": since,
            "collapsed_lines": diff.COLLAPSED_LINES,
            "launch_log": launch_log.of_attempt(tx.conn, sub["attempt_id"]),
            "comment_rows": COMMENT_ROWS,
            "highlight_chars": diff.HIGHLIGHT_CHARS,
        }

    return await page(request, build)


def reviewed_before(flow: dict[str, Any], sub: dict[str, Any]) -> dict[str, Any] | None:
    """The task's last code submission before ``sub`` that a review decided: the change this
    one amends (None for a first submission, or one that is not code)."""
    if sub["kind"] != "code":
        return None
    subs = flow["submissions"]  # newest first
    older = subs[next(i for i, s in enumerate(subs) if s["id"] == sub["id"]) + 1 :]
    decided = {r["submission_id"] for r in flow["reviews"]}
    return next((s for s in older if s["kind"] == "code" and s["id"] in decided), None)


def since_review(
    tx: Tx, flow: dict[str, Any], sub: dict[str, Any], change: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The reviewed submission this one amends, its reviews, and the difference between the
    two recorded patches (None when either patch is missing)."""
    prior = reviewed_before(flow, sub)
    if prior is None:
        return None
    row = artifacts.of_submission(tx.conn, prior["id"], "patch")
    reviewed = patch_view(row) if row is not None else None
    return {
        "submission": prior,
        "reviews": [r for r in flow["reviews"] if r["submission_id"] == prior["id"]],
        "recorded": reviewed is not None,
        "delta": interdiff.compare(reviewed, change) if reviewed and change else None,
    }
