"""Work artifacts: what an attempt produced (its submission's patch, its steps), one per
attempt and kind."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from agentc.store.sql import columns, fetch_all, fetch_one, insert, run, table


@table("work_artifacts")
class Artifact(NamedTuple):
    id: str
    project_id: str
    task_id: str
    attempt_id: str
    submission_id: str | None
    kind: str
    digest: str | None
    body_json: str
    created_by: str
    created_at: int


_OF_ATTEMPT = (
    f"SELECT {columns(Artifact)} FROM work_artifacts "
    "WHERE attempt_id = :attempt_id AND kind = :kind"
)
_OF_SUBMISSION = (
    f"SELECT {columns(Artifact)} FROM work_artifacts "
    "WHERE submission_id = :submission_id AND kind = :kind"
)
# Without the bodies: which attempts and submissions of a task have which artifacts.
_OF_TASK = (
    "SELECT id, project_id, task_id, attempt_id, submission_id, kind, digest, '' AS body_json, "
    "created_by, created_at FROM work_artifacts WHERE task_id = :task_id ORDER BY created_at"
)


def of_attempt(conn: Connection, attempt_id: str, kind: str) -> Artifact | None:
    return fetch_one(conn, _OF_ATTEMPT, Artifact, attempt_id=attempt_id, kind=kind)


def of_submission(conn: Connection, submission_id: str, kind: str) -> Artifact | None:
    return fetch_one(conn, _OF_SUBMISSION, Artifact, submission_id=submission_id, kind=kind)


def of_task(conn: Connection, task_id: str) -> list[Artifact]:
    """The task's artifacts, oldest first, with empty bodies (for listing)."""
    return fetch_all(conn, _OF_TASK, Artifact, task_id=task_id)


_OF_TASK_KIND = (
    f"SELECT {columns(Artifact)} FROM work_artifacts "
    "WHERE task_id = :task_id AND kind = :kind ORDER BY created_at"
)


def of_task_kind(conn: Connection, task_id: str, kind: str) -> list[Artifact]:
    """The task's artifacts of one kind, with their bodies, oldest first."""
    return fetch_all(conn, _OF_TASK_KIND, Artifact, task_id=task_id, kind=kind)


# The current step of a running attempt and what it spent so far (kind ``live``): one row per
# attempt, rewritten by each renewal that tells them, so the task page can show them without
# an event per step.
_SET_LIVE = (
    "UPDATE work_artifacts SET body_json = :body_json, created_at = :now "
    "WHERE attempt_id = :attempt_id AND kind = 'live'"
)
_LIVE_OF_TASK = (
    f"SELECT {columns(Artifact)} FROM work_artifacts WHERE task_id = :task_id AND kind = 'live'"
)


def note_live(
    conn: Connection, new_id: str, attempt: Any, live: dict[str, Any], by: str, now: int
) -> None:
    """Keep ``live`` (``step``: what ``attempt``, a store Attempt, is doing now; ``spent_usd``
    and ``spent_tokens``: what its model calls cost and took so far) for the task page (first:
    as ``new_id``); one not told (None) keeps the last told."""
    if None in live.values() and (told := of_attempt(conn, attempt.id, "live")) is not None:
        live = {
            k: v if v is not None else json.loads(told.body_json).get(k) for k, v in live.items()
        }
    body = json.dumps(live, separators=(",", ":"))
    if run(conn, _SET_LIVE, body_json=body, now=now, attempt_id=attempt.id):
        return
    row = Artifact(
        new_id, attempt.project_id, attempt.task_id, attempt.id, None, "live",
        None, body, by, now,
    )  # fmt: skip
    insert(conn, row)


def live_of_task(conn: Connection, task_id: str) -> dict[str, dict[str, Any]]:
    """What was told for each attempt of the task: ``{attempt: {step, spent_usd, at_ms}}``."""
    told = {}
    for row in fetch_all(conn, _LIVE_OF_TASK, Artifact, task_id=task_id):
        body = json.loads(row.body_json)
        told[row.attempt_id] = {
            "step": body.get("step"),
            "spent_usd": body.get("spent_usd"),
            "spent_tokens": body.get("spent_tokens"),
            "at_ms": row.created_at,
        }
    return told
