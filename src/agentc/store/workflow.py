"""Submissions, workflow activities and review decisions: rows and queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypedDict

from sqlalchemy.engine import Connection

from agentc.core.model import ActivityKind, ActivityState
from agentc.store.sql import columns, fetch_all, fetch_one, insert, placeholders, run, update
from agentc.store.tx import Tx


class Submission(NamedTuple):
    id: str
    task_id: str
    attempt_id: str
    kind: str
    task_revision: int
    summary: str
    evidence_json: str
    handoff: str
    candidate_ref: str | None
    candidate_revision: str | None
    base_revision: str | None
    ac_amendment_json: str | None
    created_by: str
    session_id: str
    created_at: int
    superseded_at: int | None


class Activity(NamedTuple):
    id: str
    project_id: str
    task_id: str
    submission_id: str
    kind: str
    state: str
    generation: int
    current_attempt_id: str | None
    queued_at: int
    created_at: int
    completed_at: int | None
    landed_revision: str | None


class ActivityChanges(TypedDict, total=False):
    state: str
    generation: int
    current_attempt_id: str | None
    queued_at: int
    completed_at: int
    landed_revision: str


class ReviewDecision(NamedTuple):
    id: str
    activity_id: str
    submission_id: str
    reviewer_id: str
    reviewer_kind: str
    decision: str
    summary: str
    findings_json: str
    amendment_decision: str | None
    created_at: int


class ReviewCandidate(NamedTuple):
    """A queued review activity with its task's title."""

    id: str
    task_id: str
    submission_id: str
    kind: str
    title: str


_SUBMISSION = f"SELECT {columns(Submission)} FROM submissions"
_ACTIVITY = f"SELECT {columns(Activity)} FROM activities"
_ACTIVITY_BY_ID = _ACTIVITY + " WHERE id = :id"
_DECISION = f"SELECT {columns(ReviewDecision, 'r')} FROM review_decisions r"
_OPEN_STATES = ", ".join(
    f"'{s}'" for s in (ActivityState.QUEUED, ActivityState.ACTIVE, ActivityState.WAITING)
)


def insert_submission(conn: Connection, submission: Submission) -> None:
    insert(conn, "submissions", submission)


def get_submission(conn: Connection, submission_id: str) -> Submission | None:
    return fetch_one(conn, _SUBMISSION + " WHERE id = :id", Submission, id=submission_id)


def supersede_submission(conn: Connection, submission_id: str, now: int) -> None:
    run(
        conn,
        "UPDATE submissions SET superseded_at = :now WHERE id = :id",
        now=now,
        id=submission_id,
    )


def submissions_of_task(conn: Connection, task_id: str, limit: int) -> list[Submission]:
    """The task's submissions, newest first."""
    return fetch_all(
        conn,
        _SUBMISSION + " WHERE task_id = :task_id ORDER BY created_at DESC, id LIMIT :limit",
        Submission,
        task_id=task_id,
        limit=limit,
    )


def insert_activity(conn: Connection, activity: Activity) -> None:
    insert(conn, "activities", activity)


def get_activity(conn: Connection, activity_id: str) -> Activity | None:
    return fetch_one(conn, _ACTIVITY_BY_ID, Activity, id=activity_id)


def lock_activity(tx: Tx, activity_id: str) -> Activity | None:
    return tx.lock(_ACTIVITY_BY_ID, Activity, id=activity_id)


def update_activity(conn: Connection, activity_id: str, changes: ActivityChanges) -> None:
    update(conn, "activities", "id", activity_id, changes)


def activities_of_submission(
    conn: Connection, submission_id: str, *, open_only: bool = False
) -> list[Activity]:
    """The submission's activities by kind (only the queued, active and waiting ones with
    open_only)."""
    where = f" AND state IN ({_OPEN_STATES})" if open_only else ""
    return fetch_all(
        conn,
        _ACTIVITY + f" WHERE submission_id = :submission_id{where} ORDER BY kind",
        Activity,
        submission_id=submission_id,
    )


def activities_of_task(conn: Connection, task_id: str, limit: int) -> list[Activity]:
    """The task's activities, newest first."""
    return fetch_all(
        conn,
        _ACTIVITY + " WHERE task_id = :task_id ORDER BY created_at DESC, id LIMIT :limit",
        Activity,
        task_id=task_id,
        limit=limit,
    )


def queue_integration(conn: Connection, submission_id: str, now: int) -> None:
    """The submission's integration activity joins the queue."""
    run(
        conn,
        "UPDATE activities SET state = :state, queued_at = :now "
        "WHERE submission_id = :submission_id AND kind = :kind",
        state=ActivityState.QUEUED.value,
        now=now,
        submission_id=submission_id,
        kind=ActivityKind.INTEGRATION.value,
    )


def queued_reviews(
    conn: Connection, project_id: str, kinds: Sequence[ActivityKind], limit: int
) -> list[ReviewCandidate]:
    """Queued activities of the given kinds, by task priority then queue order."""
    if not kinds:
        return []
    marks, params = placeholders("k", [k.value for k in kinds])
    return fetch_all(
        conn,
        "SELECT a.id, a.task_id, a.submission_id, a.kind, t.title FROM activities a "
        "JOIN tasks t ON t.id = a.task_id WHERE a.project_id = :project_id "
        f"AND a.state = :state AND a.kind IN ({marks}) "
        "ORDER BY t.priority, a.queued_at, a.id LIMIT :limit",
        ReviewCandidate,
        project_id=project_id,
        state=ActivityState.QUEUED.value,
        limit=limit,
        **params,
    )


def insert_decision(conn: Connection, decision: ReviewDecision) -> None:
    insert(conn, "review_decisions", decision)


def get_decision(conn: Connection, decision_id: str) -> ReviewDecision | None:
    return fetch_one(conn, _DECISION + " WHERE r.id = :id", ReviewDecision, id=decision_id)


def decisions_of_submission(conn: Connection, submission_id: str) -> list[ReviewDecision]:
    return fetch_all(
        conn,
        _DECISION + " WHERE r.submission_id = :submission_id",
        ReviewDecision,
        submission_id=submission_id,
    )


def decisions_of_task(conn: Connection, task_id: str, limit: int) -> list[ReviewDecision]:
    """The decisions on the task's activities, newest first."""
    return fetch_all(
        conn,
        _DECISION + " JOIN activities a ON a.id = r.activity_id WHERE a.task_id = :task_id "
        "ORDER BY r.created_at DESC LIMIT :limit",
        ReviewDecision,
        task_id=task_id,
        limit=limit,
    )
