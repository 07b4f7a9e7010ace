"""Submissions, reviews and integration: the completion workflow of a task."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Row, insert, select, update

from agentc.core import lease
from agentc.core.errors import CoordinatorError
from agentc.core.model import (
    CANDIDATE_REF_PREFIX,
    ActivityKind,
    ActivityState,
    AttemptState,
    Lifecycle,
    Phase,
    ReviewMode,
    TaskKind,
)
from agentc.core.rules import (
    check_candidate_ref,
    check_evidence,
    check_revision_sha,
    review_activities,
)
from agentc.service.api import Op, Result, new_id
from agentc.service.auth import denied
from agentc.service.schemas import (
    LandingIn,
    SubmissionIn,
)
from agentc.service.work.leases import checkout_view, contribute, end_attempt, owned_attempt
from agentc.service.work.views import (
    activity_view,
    project_row,
    submission_view,
    task_view,
)
from agentc.store.schema import (
    activities,
    attempts,
    submissions,
    task_dependencies,
    tasks,
)


def submit(op: Op, project_id: str, attempt_id: str, body: SubmissionIn) -> Result:
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    if row.activity_id is not None:
        raise CoordinatorError("activity_attempt", "review attempts decide, not submit", status=409)
    task = op.tx.lock(tasks, row.task_id)
    assert task is not None
    project = project_row(op.conn, project_id)
    if body.kind != task.kind:
        raise CoordinatorError(
            "invalid_input",
            f"kind: the task is a {task.kind} task",
            status=422,
            details={"field": "kind"},
        )
    if task.revision != row.task_revision:
        raise CoordinatorError(
            "pinned_revision_changed",
            "the task was edited after this attempt claimed it",
            status=409,
            details={"claimed_revision": row.task_revision, "current_revision": task.revision},
        )
    criteria: list[str] = json.loads(task.acceptance_json)
    amendment = None
    if body.ac_amendment is not None:
        if project.review_mode == ReviewMode.NONE:
            raise CoordinatorError(
                "amendment_requires_review",
                "an acceptance-criteria amendment needs a review, and this project has none",
                status=409,
            )
        if body.ac_amendment.new == criteria:
            raise CoordinatorError(
                "invalid_input",
                "ac_amendment.new: equals the criteria",
                status=422,
                details={"field": "ac_amendment.new"},
            )
        amendment = {
            "old": criteria,
            "new": body.ac_amendment.new,
            "rationale": body.ac_amendment.rationale,
        }
        criteria = body.ac_amendment.new
    check_evidence(criteria, [(e.criterion, e.evidence) for e in body.acceptance_evidence])
    if task.kind == TaskKind.CODE:
        check_candidate_ref(body.candidate_ref, CANDIDATE_REF_PREFIX)
        check_revision_sha("candidate_revision", body.candidate_revision)
        check_revision_sha("base_revision", body.base_revision)
        checkout = checkout_view(op.conn, attempt_id)
        if checkout is not None and checkout["base_revision"] != body.base_revision:
            raise CoordinatorError(
                "base_revision_mismatch",
                "base_revision differs from the base of the attempt's registered checkout",
                status=409,
                details={"checkout_base_revision": checkout["base_revision"]},
            )
    elif body.candidate_ref or body.candidate_revision or body.base_revision:
        raise CoordinatorError(
            "invalid_input",
            "candidate_ref: general submissions carry no git fields",
            status=422,
            details={"field": "candidate_ref"},
        )
    sub_id = new_id()
    if task.current_submission_id:
        op.conn.execute(
            update(submissions)
            .where(submissions.c.id == task.current_submission_id)
            .values(superseded_at=op.now)
        )
    op.conn.execute(
        insert(submissions).values(
            id=sub_id,
            task_id=task.id,
            attempt_id=attempt_id,
            kind=task.kind,
            task_revision=task.revision,
            summary=body.summary,
            evidence_json=json.dumps([e.model_dump() for e in body.acceptance_evidence]),
            handoff=body.handoff,
            candidate_ref=body.candidate_ref,
            candidate_revision=body.candidate_revision,
            base_revision=body.base_revision,
            ac_amendment_json=json.dumps(amendment) if amendment else None,
            created_by=op.actor.principal_id,
            session_id=row.session_id,
            created_at=op.now,
        )
    )
    end_attempt(op, row, AttemptState.SUBMITTED, body.handoff or None)
    contribute(op, task.id, row.session_id)
    kinds = review_activities(ReviewMode(project.review_mode), TaskKind(task.kind))
    reviews = [k for k in kinds if k != ActivityKind.INTEGRATION]
    for kind in kinds:
        waiting = kind == ActivityKind.INTEGRATION and reviews
        op.conn.execute(
            insert(activities).values(
                id=new_id(),
                project_id=project_id,
                task_id=task.id,
                submission_id=sub_id,
                kind=kind,
                state=ActivityState.WAITING if waiting else ActivityState.QUEUED,
                generation=0,
                queued_at=op.now,
                created_at=op.now,
            )
        )
    values: dict[str, Any] = {
        "current_attempt_id": None,
        "current_submission_id": sub_id,
        "updated_at": op.now,
    }
    if reviews:
        values["phase"] = Phase.REVIEW
    elif task.kind == TaskKind.CODE:
        values["phase"] = Phase.INTEGRATION
    op.conn.execute(update(tasks).where(tasks.c.id == task.id).values(**values))
    op.event(
        "submission.created",
        project_id,
        sub_id,
        task_id=task.id,
        attempt_id=attempt_id,
        generation=row.generation,
    )
    if not reviews and task.kind == TaskKind.GENERAL:
        complete_task(op, task.id)
    return Result(_submission_result(op, project_id, task.id, sub_id), status=201)


def _submission_result(op: Op, project_id: str, task_id: str, sub_id: str) -> dict[str, Any]:
    sub = op.conn.execute(select(submissions).where(submissions.c.id == sub_id)).one()
    acts = op.conn.execute(
        select(activities).where(activities.c.submission_id == sub_id).order_by(activities.c.kind)
    ).all()
    task = op.conn.execute(select(tasks).where(tasks.c.id == task_id)).one()
    return {
        "submission": submission_view(sub),
        "activities": [activity_view(a) for a in acts],
        "task": task_view(op.conn, task, op.now),
    }


def complete_task(op: Op, task_id: str) -> None:
    """Done: the task is finished and its dependents' ready clock starts now."""
    op.conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(lifecycle=Lifecycle.DONE, phase=Phase.DONE, blocked_reason=None, updated_at=op.now)
    )
    dependents = [
        r.task_id
        for r in op.conn.execute(
            select(task_dependencies.c.task_id).where(
                task_dependencies.c.prerequisite_id == task_id
            )
        )
    ]
    if dependents:
        op.conn.execute(
            update(tasks)
            .where(tasks.c.id.in_(dependents), tasks.c.lifecycle == Lifecycle.OPEN)
            .values(ready_since=op.now)
        )
    task = op.conn.execute(select(tasks).where(tasks.c.id == task_id)).one()
    op.event("task.done", task.project_id, task_id)


def locked_activity(op: Op, project_id: str, activity_id: str) -> Row[Any]:
    row = op.tx.lock(activities, activity_id)
    if row is None or row.project_id != project_id:
        raise CoordinatorError(
            "record_not_found", f"no workflow activity {activity_id}", status=404
        )
    return row


def activity_lapsed(op: Op, act: Row[Any]) -> bool:
    if act.current_attempt_id is None:
        return True
    att = op.conn.execute(select(attempts).where(attempts.c.id == act.current_attempt_id)).one()
    return att.state != AttemptState.ACTIVE or not lease.is_live(op.now, att.expires_at)


def record_landing(op: Op, project_id: str, activity_id: str, body: LandingIn) -> Result:
    """An integrator credential records that the approved candidate landed: the task is done."""
    if op.actor.credential_class != "integrator" or op.actor.access != "write":
        raise denied("only an integrator credential records a landing", required_actor="integrator")
    act = locked_activity(op, project_id, activity_id)
    if act.kind != ActivityKind.INTEGRATION:
        raise CoordinatorError("activity_kind_mismatch", "not an integration activity", status=409)
    if act.submission_id != body.submission_id:
        raise CoordinatorError(
            "workflow_revision_conflict", "the activity belongs to another submission", status=409
        )
    if act.state == ActivityState.WAITING:
        raise CoordinatorError("reviews_pending", "the submission is not approved yet", status=409)
    if act.state != ActivityState.QUEUED:
        raise CoordinatorError("activity_not_eligible", f"the activity is {act.state}", status=409)
    op.conn.execute(
        update(activities)
        .where(activities.c.id == act.id)
        .values(
            state=ActivityState.COMPLETED, completed_at=op.now, landed_revision=body.landed_revision
        )
    )
    op.event(
        "integration.completed",
        project_id,
        act.id,
        submission_id=act.submission_id,
        landed_revision=body.landed_revision,
    )
    complete_task(op, act.task_id)
    task = op.conn.execute(select(tasks).where(tasks.c.id == act.task_id)).one()
    return Result(
        {
            "activity": activity_view(
                op.conn.execute(select(activities).where(activities.c.id == act.id)).one()
            ),
            "task": task_view(op.conn, task, op.now),
        }
    )
