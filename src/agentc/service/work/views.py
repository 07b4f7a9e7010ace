"""Loading records and turning them into API objects (reads shared by every operation)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Row, and_, select
from sqlalchemy.engine import Connection

from agentc.core.errors import CoordinatorError
from agentc.core.model import Lifecycle
from agentc.core.rules import rfc3339
from agentc.core.status import AttemptFacts, TaskFacts, work_status
from agentc.store.schema import (
    activities,
    attempts,
    review_decisions,
    submissions,
)
from agentc.store.tx import q, q1


def not_found(what: str, ident: str) -> CoordinatorError:
    return CoordinatorError(
        "record_not_found", f"no {what} {ident}", status=404, details={what + "_id": ident}
    )


def project_row(conn: Connection, project_id: str) -> Any:
    row = q1(conn, "SELECT * FROM projects WHERE id = :id", id=project_id)
    if row is None:
        raise CoordinatorError(
            "project_not_found",
            f"no project {project_id}",
            status=404,
            details={"project_id": project_id},
        )
    return row


def task_row(conn: Connection, project_id: str, task_id: str) -> Any:
    row = q1(
        conn,
        "SELECT * FROM tasks WHERE id = :id AND project_id = :project_id",
        id=task_id,
        project_id=project_id,
    )
    if row is None:
        raise not_found("task", task_id)
    return row


def project_view(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "repository_url": row.repository_url,
        "target_branch": row.target_branch,
        "policy": {
            "revision": row.policy_revision,
            "review_mode": row.review_mode,
            "lease_seconds": row.lease_seconds,
            "max_attempt_seconds": row.max_attempt_seconds,
            "required_checks": json.loads(row.required_checks_json),
        },
        "created_at": rfc3339(row.created_at),
        "updated_at": rfc3339(row.updated_at),
    }


_OWNER = (
    "SELECT p.disabled_at, c.revoked_at, s.closed_at FROM attempts a "
    "JOIN principals p ON p.id = a.owner_id JOIN credentials c ON c.id = a.credential_id "
    "JOIN agent_sessions s ON s.id = a.session_id WHERE a.id = :id"
)
_PENDING_PREREQUISITE = (
    "SELECT t.id FROM task_dependencies d JOIN tasks t ON t.id = d.prerequisite_id "
    "WHERE d.task_id = :task_id AND t.lifecycle <> 'done' LIMIT 1"
)


def owner_authorized(conn: Connection, attempt: Any) -> bool:
    """The owner of a lease still holds it only while its principal, credential and session
    are live."""
    row = q1(conn, _OWNER, id=attempt.id)
    return (
        row is not None
        and row.disabled_at is None
        and row.revoked_at is None
        and row.closed_at is None
    )


def attempt_row(conn: Connection, attempt_id: str | None) -> Any:
    if attempt_id is None:
        return None
    return q1(conn, "SELECT * FROM attempts WHERE id = :id", id=attempt_id)


def prerequisites_done(conn: Connection, task_id: str) -> bool:
    return q1(conn, _PENDING_PREREQUISITE, task_id=task_id) is None


def task_facts(conn: Connection, task: Any) -> TaskFacts:
    current = attempt_row(conn, task.current_attempt_id)
    facts = None
    if current is not None:
        facts = AttemptFacts(current.state, current.expires_at, owner_authorized(conn, current))
    return TaskFacts(
        lifecycle=task.lifecycle,
        phase=task.phase,
        blocked_reason=task.blocked_reason,
        current_attempt=facts,
        prerequisites_done=prerequisites_done(conn, task.id),
    )


def dependencies_of(conn: Connection, task_id: str) -> list[str]:
    rows = q(
        conn,
        "SELECT prerequisite_id FROM task_dependencies WHERE task_id = :task_id "
        "ORDER BY prerequisite_id",
        task_id=task_id,
    )
    return [r.prerequisite_id for r in rows]


def task_view(conn: Connection, task: Any, now: int) -> dict[str, Any]:
    return {
        "id": task.id,
        "project_id": task.project_id,
        "title": task.title,
        "description": task.description,
        "acceptance_criteria": json.loads(task.acceptance_json),
        "kind": task.kind,
        "priority": task.priority,
        "lifecycle": task.lifecycle,
        "work_status": work_status(task_facts(conn, task), now).value,
        "revision": task.revision,
        "generation": task.generation,
        "current_attempt_id": task.current_attempt_id,
        "current_submission_id": task.current_submission_id,
        "phase": task.phase,
        "blocked_reason": task.blocked_reason,
        "depends_on": dependencies_of(conn, task.id),
        "origin": task.origin,
        "admission_class": task.admission_class,
        "budget_held": task.budget_held_at is not None and task.lifecycle == Lifecycle.PLANNED,
        "ready_since": rfc3339(task.ready_since),
        "created_at": rfc3339(task.created_at),
        "updated_at": rfc3339(task.updated_at),
    }


def attempt_view(row: Any, now: int) -> dict[str, Any]:
    return {
        "id": row.id,
        "project_id": row.project_id,
        "task_id": row.task_id,
        "activity_id": row.activity_id,
        "owner_id": row.owner_id,
        "session_id": row.session_id,
        "generation": row.generation,
        "state": row.state,
        "mode": row.mode,
        "expires_at": rfc3339(row.expires_at),
        "lease_remaining_ms": max(0, row.expires_at - now) if row.state == "active" else 0,
        "last_heartbeat_at": rfc3339(row.last_heartbeat_at),
        "last_progress_at": rfc3339(row.last_progress_at),
        "created_at": rfc3339(row.created_at),
        "ended_at": rfc3339(row.ended_at),
        "outcome": row.outcome,
        "handoff": row.handoff,
    }


def submission_view(row: Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "task_id": row.task_id,
        "attempt_id": row.attempt_id,
        "kind": row.kind,
        "task_revision": row.task_revision,
        "summary": row.summary,
        "acceptance_evidence": json.loads(row.evidence_json),
        "handoff": row.handoff,
        "candidate_ref": row.candidate_ref,
        "candidate_revision": row.candidate_revision,
        "base_revision": row.base_revision,
        "ac_amendment": json.loads(row.ac_amendment_json) if row.ac_amendment_json else None,
        "session_id": row.session_id,
        "created_at": rfc3339(row.created_at),
        "superseded_at": rfc3339(row.superseded_at),
    }


def activity_view(row: Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "task_id": row.task_id,
        "submission_id": row.submission_id,
        "kind": row.kind,
        "state": row.state,
        "generation": row.generation,
        "current_attempt_id": row.current_attempt_id,
        "landed_revision": row.landed_revision,
        "created_at": rfc3339(row.created_at),
        "completed_at": rfc3339(row.completed_at),
    }


def decision_view(row: Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "activity_id": row.activity_id,
        "submission_id": row.submission_id,
        "reviewer_id": row.reviewer_id,
        "reviewer_kind": row.reviewer_kind,
        "decision": row.decision,
        "summary": row.summary,
        "findings": json.loads(row.findings_json),
        "amendment_decision": row.amendment_decision,
        "created_at": rfc3339(row.created_at),
    }


def workflow_view(conn: Connection, task: Row[Any], now: int) -> dict[str, Any]:
    subs = conn.execute(
        select(submissions)
        .where(submissions.c.task_id == task.id)
        .order_by(submissions.c.created_at.desc(), submissions.c.id)
        .limit(20)
    ).all()
    acts = conn.execute(
        select(activities)
        .where(activities.c.task_id == task.id)
        .order_by(activities.c.created_at.desc(), activities.c.id)
        .limit(50)
    ).all()
    decisions = conn.execute(
        select(review_decisions)
        .join(activities, activities.c.id == review_decisions.c.activity_id)
        .where(activities.c.task_id == task.id)
        .order_by(review_decisions.c.created_at.desc())
        .limit(50)
    ).all()
    current = next((s for s in subs if s.id == task.current_submission_id), None)
    return {
        "phase": task.phase,
        "work_status": work_status(task_facts(conn, task), now).value,
        "submission": submission_view(current) if current else None,
        "submissions": [submission_view(s) for s in subs],
        "activities": [activity_view(a) for a in acts],
        "reviews": [decision_view(d) for d in decisions],
    }


def task_detail(conn: Connection, task: Row[Any], now: int) -> dict[str, Any]:
    recent = conn.execute(
        select(attempts)
        .where(and_(attempts.c.task_id == task.id))
        .order_by(attempts.c.created_at.desc(), attempts.c.generation.desc())
        .limit(50)
    ).all()
    return {
        **task_view(conn, task, now),
        "attempts": [attempt_view(a, now) for a in recent],
        "workflow": workflow_view(conn, task, now),
    }
