"""Submissions, workflow activities and review decisions: rows and queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypedDict

from sqlalchemy.engine import Connection

from agentc.core.model import ActivityKind, ActivityState
from agentc.store.sql import columns, fetch_all, placeholders, run, table, update


@table("submissions")
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


@table("activities")
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
    target_revision: str | None = None
    outcome_json: str | None = None


class ActivityChanges(TypedDict, total=False):
    state: str
    generation: int
    current_attempt_id: str | None
    queued_at: int
    completed_at: int
    landed_revision: str
    target_revision: str | None
    outcome_json: str


@table("review_decisions")
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


class QueuedLanding(NamedTuple):
    """A queued integration activity with what its landing needs."""

    activity_id: str
    task_id: str
    title: str
    submission_id: str
    candidate_ref: str | None
    candidate_revision: str | None
    base_revision: str | None
    queued_at: int
    outcome_json: str | None


class ReviewCandidate(NamedTuple):
    """A queued review activity with its task's title."""

    id: str
    task_id: str
    submission_id: str
    kind: str
    title: str


_SUBMISSION = f"SELECT {columns(Submission)} FROM submissions"
_SUBMISSIONS_OF_TASK = (
    _SUBMISSION + " WHERE task_id = :task_id ORDER BY created_at DESC, id LIMIT :limit"
)
_SUPERSEDE = "UPDATE submissions SET superseded_at = :now WHERE id = :id"

_ACTIVITY = f"SELECT {columns(Activity)} FROM activities"
_ACTIVITIES_OF_SUBMISSION = _ACTIVITY + " WHERE submission_id = :submission_id ORDER BY kind"
_OPEN_ACTIVITIES_OF_SUBMISSION = _ACTIVITY + (
    " WHERE submission_id = :submission_id AND state IN ("
    + ", ".join(
        f"'{s}'" for s in (ActivityState.QUEUED, ActivityState.ACTIVE, ActivityState.WAITING)
    )
    + ") ORDER BY kind"
)
_ACTIVITIES_OF_TASK = (
    _ACTIVITY + " WHERE task_id = :task_id ORDER BY created_at DESC, id LIMIT :limit"
)
_QUEUE_INTEGRATION = (
    f"UPDATE activities SET state = '{ActivityState.QUEUED}', queued_at = :now "
    f"WHERE submission_id = :submission_id AND kind = '{ActivityKind.INTEGRATION}'"
)
_QUEUED_REVIEWS = (
    "SELECT a.id, a.task_id, a.submission_id, a.kind, t.title FROM activities a "
    "JOIN tasks t ON t.id = a.task_id WHERE a.project_id = :project_id "
    f"AND a.state = '{ActivityState.QUEUED}' AND a.kind IN ({{kinds}}) "
    "ORDER BY t.priority, a.queued_at, a.id LIMIT :limit"
)

_LANDING_QUEUE = (
    "SELECT a.id, a.task_id, t.title, a.submission_id, s.candidate_ref, s.candidate_revision, "
    "s.base_revision, a.queued_at, a.outcome_json FROM activities a "
    "JOIN tasks t ON t.id = a.task_id JOIN submissions s ON s.id = a.submission_id "
    f"WHERE a.project_id = :project_id AND a.state = '{ActivityState.QUEUED}' "
    f"AND a.kind = '{ActivityKind.INTEGRATION}' ORDER BY a.queued_at, a.id LIMIT :limit"
)

_DECISION = f"SELECT {columns(ReviewDecision, 'r')} FROM review_decisions r"
_DECISIONS_OF_SUBMISSION = _DECISION + " WHERE r.submission_id = :submission_id"
_DECISIONS_OF_TASK = _DECISION + (
    " JOIN activities a ON a.id = r.activity_id WHERE a.task_id = :task_id "
    "ORDER BY r.created_at DESC LIMIT :limit"
)


def supersede_submission(conn: Connection, submission_id: str, now: int) -> None:
    run(conn, _SUPERSEDE, now=now, id=submission_id)


def submissions_of_task(conn: Connection, task_id: str, limit: int) -> list[Submission]:
    """The task's submissions, newest first."""
    return fetch_all(conn, _SUBMISSIONS_OF_TASK, Submission, task_id=task_id, limit=limit)


def update_activity(conn: Connection, activity_id: str, changes: ActivityChanges) -> None:
    update(conn, Activity, activity_id, changes)


def activities_of_submission(
    conn: Connection, submission_id: str, *, open_only: bool = False
) -> list[Activity]:
    """The submission's activities by kind (only the queued, active and waiting ones with
    open_only)."""
    sql = _OPEN_ACTIVITIES_OF_SUBMISSION if open_only else _ACTIVITIES_OF_SUBMISSION
    return fetch_all(conn, sql, Activity, submission_id=submission_id)


def activities_of_task(conn: Connection, task_id: str, limit: int) -> list[Activity]:
    """The task's activities, newest first."""
    return fetch_all(conn, _ACTIVITIES_OF_TASK, Activity, task_id=task_id, limit=limit)


def queue_integration(conn: Connection, submission_id: str, now: int) -> None:
    """The submission's integration activity joins the queue."""
    run(conn, _QUEUE_INTEGRATION, now=now, submission_id=submission_id)


def queued_reviews(
    conn: Connection, project_id: str, kinds: Sequence[ActivityKind], limit: int
) -> list[ReviewCandidate]:
    """Queued activities of the given kinds, by task priority then queue order."""
    if not kinds:
        return []
    marks, params = placeholders("k", [k.value for k in kinds])
    sql = _QUEUED_REVIEWS.format(kinds=marks)
    return fetch_all(conn, sql, ReviewCandidate, project_id=project_id, limit=limit, **params)


def landing_queue(conn: Connection, project_id: str, limit: int) -> list[QueuedLanding]:
    """The project's approved submissions waiting to land, in approval order (an integration
    activity is queued when its reviews approve it)."""
    return fetch_all(conn, _LANDING_QUEUE, QueuedLanding, project_id=project_id, limit=limit)


def decisions_of_submission(conn: Connection, submission_id: str) -> list[ReviewDecision]:
    return fetch_all(conn, _DECISIONS_OF_SUBMISSION, ReviewDecision, submission_id=submission_id)


def decisions_of_task(conn: Connection, task_id: str, limit: int) -> list[ReviewDecision]:
    """The decisions on the task's activities, newest first."""
    return fetch_all(conn, _DECISIONS_OF_TASK, ReviewDecision, task_id=task_id, limit=limit)
