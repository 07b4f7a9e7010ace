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


# The current step of a running attempt (kind ``live``): one row per attempt, rewritten by
# each renewal that carries a step, so the task page can show it without an event per step.
_SET_LIVE = (
    "UPDATE work_artifacts SET body_json = :body_json, created_at = :now "
    "WHERE attempt_id = :attempt_id AND kind = 'live'"
)
_LIVE_OF_TASK = (
    f"SELECT {columns(Artifact)} FROM work_artifacts WHERE task_id = :task_id AND kind = 'live'"
)


def note_live(conn: Connection, new_id: str, attempt: Any, step: str, by: str, now: int) -> None:
    """Keep ``step`` as what ``attempt`` (a store Attempt) is doing now (first: as ``new_id``)."""
    body = json.dumps({"step": step}, separators=(",", ":"))
    if run(conn, _SET_LIVE, body_json=body, now=now, attempt_id=attempt.id):
        return
    row = Artifact(
        new_id, attempt.project_id, attempt.task_id, attempt.id, None, "live",
        None, body, by, now,
    )  # fmt: skip
    insert(conn, row)


def live_of_task(conn: Connection, task_id: str) -> dict[str, dict[str, Any]]:
    """The current step told for each attempt of the task: ``{attempt: {step, at_ms}}``."""
    return {
        row.attempt_id: {"step": json.loads(row.body_json)["step"], "at_ms": row.created_at}
        for row in fetch_all(conn, _LIVE_OF_TASK, Artifact, task_id=task_id)
    }
