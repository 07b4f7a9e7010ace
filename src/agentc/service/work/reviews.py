"""Reviews: claiming a review activity, deciding it, releasing it, the review queue."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Row, insert, select, update
from sqlalchemy.exc import IntegrityError

from agentc.core import lease
from agentc.core.errors import CoordinatorError
from agentc.core.model import (
    ActivityKind,
    ActivityState,
    AttemptMode,
    AttemptState,
    Decision,
    Phase,
    TaskKind,
)
from agentc.core.rules import (
    may_review,
)
from agentc.service.api import Op, Result, new_id
from agentc.service.auth import require_agent_session
from agentc.service.schemas import (
    ActivityClaimIn,
    ActivityReleaseIn,
    ReviewIn,
)
from agentc.service.work.leases import end_attempt, owned_attempt
from agentc.service.work.views import (
    activity_view,
    attempt_view,
    decision_view,
    project_row,
    submission_view,
    task_view,
)
from agentc.service.work.workflow import activity_lapsed, complete_task, locked_activity
from agentc.store.schema import (
    activities,
    attempts,
    review_decisions,
    submissions,
    task_contributors,
    tasks,
)


def claim_activity(op: Op, project_id: str, activity_id: str, body: ActivityClaimIn) -> Result:
    session_id = require_agent_session(op.actor)
    act = locked_activity(op, project_id, activity_id)
    if act.submission_id != body.expected_submission_id:
        raise CoordinatorError(
            "workflow_revision_conflict",
            "the activity belongs to another submission",
            status=409,
            details={"submission_id": act.submission_id},
        )
    if act.kind == ActivityKind.INTEGRATION or not may_review(act.kind, actor_is_human=False):
        raise CoordinatorError(
            "activity_kind_mismatch", f"agents cannot claim a {act.kind} activity", status=403
        )
    if act.state == ActivityState.ACTIVE and not activity_lapsed(op, act):
        raise CoordinatorError("claim_conflict", "another reviewer holds this activity", status=409)
    if act.state not in (ActivityState.QUEUED, ActivityState.ACTIVE):
        raise CoordinatorError("activity_not_eligible", f"the activity is {act.state}", status=409)
    _check_independent(op, act.task_id, session_id)
    project = project_row(op.conn, project_id)
    task = op.conn.execute(select(tasks).where(tasks.c.id == act.task_id)).one()
    if act.current_attempt_id is not None:
        op.conn.execute(
            update(attempts)
            .where(attempts.c.id == act.current_attempt_id, attempts.c.state == AttemptState.ACTIVE)
            .values(state=AttemptState.EXPIRED, ended_at=op.now)
        )
    generation = act.generation + 1
    attempt_id = new_id()
    expires = lease.renewed_expiry(
        op.now, project.lease_seconds, op.now, project.max_attempt_seconds
    )
    try:
        with op.tx.savepoint_if_concurrent():
            op.conn.execute(
                insert(attempts).values(
                    id=attempt_id,
                    project_id=project_id,
                    task_id=act.task_id,
                    activity_id=act.id,
                    owner_id=op.actor.principal_id,
                    session_id=session_id,
                    credential_id=op.actor.credential_id,
                    generation=generation,
                    state=AttemptState.ACTIVE,
                    mode=AttemptMode.REVIEW,
                    task_revision=task.revision,
                    policy_revision=project.policy_revision,
                    expires_at=expires,
                    last_heartbeat_at=op.now,
                    last_progress_at=op.now,
                    created_at=op.now,
                )
            )
    except IntegrityError as exc:
        raise CoordinatorError(
            "claim_conflict", "the activity was claimed concurrently", status=409
        ) from exc
    op.conn.execute(
        update(activities)
        .where(activities.c.id == act.id)
        .values(state=ActivityState.ACTIVE, generation=generation, current_attempt_id=attempt_id)
    )
    op.event(
        "workflow_activity.claimed",
        project_id,
        act.id,
        attempt_id=attempt_id,
        generation=generation,
    )
    att = op.conn.execute(select(attempts).where(attempts.c.id == attempt_id)).one()
    sub = op.conn.execute(select(submissions).where(submissions.c.id == act.submission_id)).one()
    remaining = expires - op.now
    return Result(
        {
            "activity": activity_view(
                op.conn.execute(select(activities).where(activities.c.id == act.id)).one()
            ),
            "attempt": attempt_view(att, op.now),
            "submission": submission_view(sub),
            "task": task_view(op.conn, task, op.now),
            "lease_remaining_ms": remaining,
            "renew_after_seconds": lease.renew_after_seconds(remaining),
        },
        status=201,
    )


def _check_independent(op: Op, task_id: str, session_id: str | None) -> None:
    """A reviewer must not have contributed to the task: neither its principal nor session."""
    conds = task_contributors.c.principal_id == op.actor.principal_id
    if session_id is not None:
        conds = conds | (task_contributors.c.session_id == session_id)
    hit = op.conn.execute(
        select(task_contributors.c.task_id)
        .where(task_contributors.c.task_id == task_id, conds)
        .limit(1)
    ).first()
    if hit is not None:
        raise CoordinatorError(
            "reviewer_not_independent",
            "the reviewer (its account or session) contributed to this task",
            status=403,
        )


def decide(op: Op, project_id: str, activity_id: str, body: ReviewIn) -> Result:
    act = locked_activity(op, project_id, activity_id)
    if act.kind == ActivityKind.INTEGRATION:
        raise CoordinatorError(
            "activity_kind_mismatch", "integration is recorded by landing", status=409
        )
    if act.submission_id != body.submission_id:
        raise CoordinatorError(
            "workflow_revision_conflict", "the activity belongs to another submission", status=409
        )
    if op.actor.is_human:
        if not may_review(act.kind, actor_is_human=True):
            raise CoordinatorError(
                "activity_kind_mismatch", f"humans cannot decide a {act.kind} activity", status=403
            )
        if act.state != ActivityState.QUEUED and not (
            act.state == ActivityState.ACTIVE and activity_lapsed(op, act)
        ):
            raise CoordinatorError(
                "activity_not_eligible", f"the activity is {act.state}", status=409
            )
        _check_independent(op, act.task_id, None)
    else:
        if body.generation is None:
            raise CoordinatorError(
                "invalid_input",
                "generation: required for agent reviews",
                status=422,
                details={"field": "generation"},
            )
        if act.current_attempt_id is None:
            raise CoordinatorError("lease_expired", "claim the activity first", status=409)
        att = owned_attempt(op, project_id, act.current_attempt_id, body.generation)
        _check_independent(op, act.task_id, att.session_id)
        end_attempt(op, att, AttemptState.SUBMITTED, None)
    if body.decision == "approved" and any(f.severity == "required" for f in body.findings):
        raise CoordinatorError(
            "invalid_input",
            "findings: an approval cannot carry a required finding",
            status=422,
            details={"field": "findings"},
        )
    sub = op.conn.execute(select(submissions).where(submissions.c.id == act.submission_id)).one()
    decision = Decision(body.decision)
    if sub.ac_amendment_json and decision == Decision.APPROVED:
        if body.amendment_decision is None:
            raise CoordinatorError(
                "invalid_input",
                "amendment_decision: required when approving a submission "
                "that amends its acceptance criteria",
                status=422,
                details={"field": "amendment_decision"},
            )
        if body.amendment_decision == "rejected":
            decision = Decision.CHANGES_REQUESTED
    elif body.amendment_decision is not None:
        raise CoordinatorError(
            "invalid_input",
            "amendment_decision: only when approving an amendment",
            status=422,
            details={"field": "amendment_decision"},
        )
    did = new_id()
    op.conn.execute(
        insert(review_decisions).values(
            id=did,
            activity_id=act.id,
            submission_id=sub.id,
            reviewer_id=op.actor.principal_id,
            reviewer_kind=op.actor.kind,
            decision=decision,
            summary=body.summary,
            findings_json=json.dumps([f.model_dump() for f in body.findings]),
            amendment_decision=body.amendment_decision,
            created_at=op.now,
        )
    )
    op.conn.execute(
        update(activities)
        .where(activities.c.id == act.id)
        .values(state=ActivityState.COMPLETED, completed_at=op.now)
    )
    op.event("review.decided", project_id, did, activity_id=act.id, decision=decision)
    if decision == Decision.CHANGES_REQUESTED:
        _send_back(op, act.task_id, sub.id)
    else:
        _after_approval(op, act.task_id, sub)
    task = op.conn.execute(select(tasks).where(tasks.c.id == act.task_id)).one()
    dec = op.conn.execute(select(review_decisions).where(review_decisions.c.id == did)).one()
    return Result(
        {"review": decision_view(dec), "task": task_view(op.conn, task, op.now)}, status=201
    )


def _send_back(op: Op, task_id: str, sub_id: str) -> None:
    """changes_requested: the submission is superseded, other activities canceled, and the
    task is ready again with the findings on record."""
    for other in op.conn.execute(
        select(activities).where(
            activities.c.submission_id == sub_id,
            activities.c.state.in_(
                [ActivityState.QUEUED, ActivityState.ACTIVE, ActivityState.WAITING]
            ),
        )
    ).all():
        if other.current_attempt_id:
            op.conn.execute(
                update(attempts)
                .where(
                    attempts.c.id == other.current_attempt_id,
                    attempts.c.state == AttemptState.ACTIVE,
                )
                .values(state=AttemptState.CANCELED, ended_at=op.now)
            )
        op.conn.execute(
            update(activities)
            .where(activities.c.id == other.id)
            .values(state=ActivityState.CANCELED, completed_at=op.now)
        )
    op.conn.execute(
        update(submissions).where(submissions.c.id == sub_id).values(superseded_at=op.now)
    )
    op.conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(
            phase=Phase.REVISION_NEEDED,
            current_submission_id=None,
            ready_since=op.now,
            updated_at=op.now,
        )
    )


def _after_approval(op: Op, task_id: str, sub: Row[Any]) -> None:
    acts = op.conn.execute(select(activities).where(activities.c.submission_id == sub.id)).all()
    if not _satisfied(op, [a for a in acts if a.kind != ActivityKind.INTEGRATION]):
        return
    task = op.conn.execute(select(tasks).where(tasks.c.id == task_id)).one()
    if sub.ac_amendment_json:
        amendment = json.loads(sub.ac_amendment_json)
        op.conn.execute(
            update(tasks)
            .where(tasks.c.id == task_id)
            .values(acceptance_json=json.dumps(amendment["new"]), revision=task.revision + 1)
        )
        op.event("task.criteria_amended", task.project_id, task_id, submission_id=sub.id)
    if task.kind == TaskKind.GENERAL:
        complete_task(op, task_id)
        return
    op.conn.execute(
        update(activities)
        .where(activities.c.submission_id == sub.id, activities.c.kind == ActivityKind.INTEGRATION)
        .values(state=ActivityState.QUEUED, queued_at=op.now)
    )
    op.conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(phase=Phase.INTEGRATION, updated_at=op.now)
    )


def _satisfied(op: Op, reviews: list[Row[Any]]) -> bool:
    """Every review slot holds an approval (an approval counts once, for its own slot)."""
    decided = {
        d.activity_id: d
        for d in op.conn.execute(
            select(review_decisions).where(
                review_decisions.c.activity_id.in_([a.id for a in reviews])
            )
        ).all()
    }
    return all(a.id in decided and decided[a.id].decision == Decision.APPROVED for a in reviews)


def release_activity(op: Op, project_id: str, activity_id: str, body: ActivityReleaseIn) -> Result:
    act = locked_activity(op, project_id, activity_id)
    if act.current_attempt_id is None:
        raise CoordinatorError("lease_expired", "the activity has no attempt", status=409)
    att = owned_attempt(op, project_id, act.current_attempt_id, body.generation)
    end_attempt(op, att, AttemptState.RELEASED, body.summary)
    op.conn.execute(
        update(activities)
        .where(activities.c.id == act.id)
        .values(state=ActivityState.QUEUED, current_attempt_id=None, queued_at=op.now)
    )
    op.event("workflow_activity.released", project_id, act.id, generation=att.generation)
    return Result(
        {
            "activity": activity_view(
                op.conn.execute(select(activities).where(activities.c.id == act.id)).one()
            )
        }
    )


def review_queue_next(
    op_conn: Any,
    project_id: str,
    now: int,
    principal_id: str,
    session_id: str | None,
    is_human: bool,
) -> dict[str, Any]:
    """The next review the caller may take (independent of the task), or none."""
    kinds = [
        k
        for k in ActivityKind
        if k != ActivityKind.INTEGRATION and may_review(k, actor_is_human=is_human)
    ]
    rows = op_conn.execute(
        select(activities, tasks.c.priority, tasks.c.title)
        .join(tasks, tasks.c.id == activities.c.task_id)
        .where(
            activities.c.project_id == project_id,
            activities.c.state == ActivityState.QUEUED,
            activities.c.kind.in_(kinds),
        )
        .order_by(tasks.c.priority, activities.c.queued_at, activities.c.id)
        .limit(50)
    ).all()
    for row in rows:
        conds = task_contributors.c.principal_id == principal_id
        if session_id:
            conds = conds | (task_contributors.c.session_id == session_id)
        if op_conn.execute(
            select(task_contributors.c.task_id)
            .where(task_contributors.c.task_id == row.task_id, conds)
            .limit(1)
        ).first():
            continue
        return {
            "role": "reviewer",
            "action": {
                "kind": "claim_review",
                "activity_id": row.id,
                "activity_kind": row.kind,
                "task_id": row.task_id,
                "title": row.title,
                "submission_id": row.submission_id,
                "call": {
                    "method": "POST",
                    "path": f"/api/v1/projects/{project_id}/workflow-activities/{row.id}/claim",
                    "body": {"expected_submission_id": row.submission_id},
                },
            },
            "inspected": len(rows),
            "retry_after_seconds": 0,
        }
    return {"role": "reviewer", "action": None, "inspected": len(rows), "retry_after_seconds": 30}
