"""Reviews: claiming a review activity, deciding it, releasing it, the review queue."""

from __future__ import annotations

import json

from sqlalchemy.engine import Connection

from agentc.core import lease
from agentc.core.model import (
    ActivityKind,
    ActivityState,
    AmendmentDecision,
    AttemptMode,
    AttemptState,
    Decision,
    Phase,
    Role,
    Severity,
    TaskKind,
)
from agentc.core.rules import may_review
from agentc.service.auth import require_agent_session
from agentc.service.ops import JsonObject, Op, Result, new_id
from agentc.service.schemas import ActivityClaimIn, ActivityReleaseIn, ReviewIn
from agentc.service.work import activities, launch_log
from agentc.service.work.leases import end_attempt, new_attempt, owned_attempt, suggestion
from agentc.service.work.refusals import conflict, forbidden, invalid
from agentc.service.work.views import (
    attempt_view,
    decision_view,
    project_row,
    submission_view,
    task_view,
)
from agentc.store import leases, tasks, workflow
from agentc.store.sql import fetch_row, insert
from agentc.store.tasks import Task, TaskChanges
from agentc.store.workflow import Activity, ReviewDecision, Submission

REVIEW_SCAN = 50


def claim_activity(op: Op, project_id: str, activity_id: str, body: ActivityClaimIn) -> Result:
    session_id = require_agent_session(op.actor)
    act = activities.locked(op, project_id, activity_id)
    activities.check_submission(act, body.expected_submission_id, submission_id=act.submission_id)
    if act.kind == ActivityKind.INTEGRATION or not may_review(act.kind, actor_is_human=False):
        raise forbidden("activity_kind_mismatch", f"agents cannot claim a {act.kind} activity")
    if act.state == ActivityState.ACTIVE and not activities.lapsed(op, act):
        raise conflict("claim_conflict", "another reviewer holds this activity")
    if act.state not in (ActivityState.QUEUED, ActivityState.ACTIVE):
        raise conflict("activity_not_eligible", f"the activity is {act.state}")
    _check_independent(op, act.task_id, session_id)
    project = project_row(op.conn, project_id)
    task = fetch_row(op.conn, Task, act.task_id)
    assert task is not None
    if act.current_attempt_id is not None:
        leases.end_if_active(op.conn, act.current_attempt_id, op.now, AttemptState.EXPIRED)
    generation = act.generation + 1
    attempt = new_attempt(
        op,
        project,
        session_id,
        task=task,
        activity_id=act.id,
        generation=generation,
        mode=AttemptMode.REVIEW,
    )
    workflow.update_activity(
        op.conn,
        act.id,
        {"state": ActivityState.ACTIVE, "generation": generation, "current_attempt_id": attempt.id},
    )
    op.event(
        "workflow_activity.claimed",
        project_id,
        act.id,
        attempt_id=attempt.id,
        generation=generation,
    )
    sub = fetch_row(op.conn, Submission, act.submission_id)
    assert sub is not None
    remaining = attempt.expires_at - op.now
    return Result(
        {
            "activity": activities.activity_now(op, act.id),
            "attempt": attempt_view(attempt, op.now),
            "submission": submission_view(sub),
            # What the implementer's launch did besides its diff (None: not recorded yet).
            "launch_log": launch_log.of_attempt(op.conn, sub.attempt_id),
            "task": task_view(op.conn, task, op.now),
            "lease_remaining_ms": remaining,
            "renew_after_seconds": lease.renew_after_seconds(remaining),
        },
        status=201,
    )


def _check_independent(op: Op, task_id: str, session_id: str | None) -> None:
    """A reviewer must not have contributed to the task: neither its principal nor session."""
    if leases.contributed(op.conn, task_id, op.actor.principal_id, session_id):
        raise forbidden(
            "reviewer_not_independent",
            "the reviewer (its account or session) contributed to this task",
        )


def _check_reviewer(op: Op, project_id: str, act: Activity, body: ReviewIn) -> None:
    """A human decides a queued (or lapsed) activity of a kind humans review; an agent
    decides the activity it holds, which ends its attempt."""
    if op.actor.is_human:
        if not may_review(act.kind, actor_is_human=True):
            raise forbidden("activity_kind_mismatch", f"humans cannot decide a {act.kind} activity")
        if act.state != ActivityState.QUEUED and not (
            act.state == ActivityState.ACTIVE and activities.lapsed(op, act)
        ):
            raise conflict("activity_not_eligible", f"the activity is {act.state}")
        _check_independent(op, act.task_id, None)
        return
    if body.generation is None:
        raise invalid("generation", "required for agent reviews")
    if act.current_attempt_id is None:
        raise conflict("lease_expired", "claim the activity first")
    att = owned_attempt(op, project_id, act.current_attempt_id, body.generation)
    _check_independent(op, act.task_id, att.session_id)
    end_attempt(op, att, AttemptState.SUBMITTED, None)


def _decision(sub: Submission, body: ReviewIn) -> Decision:
    """The decision recorded: an approval whose criteria amendment is rejected sends the
    submission back."""
    decision = Decision(body.decision)
    if decision == Decision.APPROVED and any(
        f.severity == Severity.REQUIRED.value for f in body.findings
    ):
        raise invalid("findings", "an approval cannot carry a required finding")
    if sub.ac_amendment_json and decision == Decision.APPROVED:
        if body.amendment_decision is None:
            raise invalid(
                "amendment_decision",
                "required when approving a submission that amends its acceptance criteria",
            )
        if body.amendment_decision == AmendmentDecision.REJECTED.value:
            return Decision.CHANGES_REQUESTED
    elif body.amendment_decision is not None:
        raise invalid("amendment_decision", "only when approving an amendment")
    return decision


def decide(op: Op, project_id: str, activity_id: str, body: ReviewIn) -> Result:
    act = activities.locked(op, project_id, activity_id)
    if act.kind == ActivityKind.INTEGRATION:
        raise conflict("activity_kind_mismatch", "integration is recorded by landing")
    activities.check_submission(act, body.submission_id)
    _check_reviewer(op, project_id, act, body)
    sub = fetch_row(op.conn, Submission, act.submission_id)
    assert sub is not None
    decision = _decision(sub, body)
    record = ReviewDecision(
        id=new_id(),
        activity_id=act.id,
        submission_id=sub.id,
        reviewer_id=op.actor.principal_id,
        reviewer_kind=op.actor.kind,
        decision=decision.value,
        summary=body.summary,
        findings_json=json.dumps([f.model_dump() for f in body.findings]),
        amendment_decision=body.amendment_decision,
        created_at=op.now,
    )
    insert(op.conn, record)
    workflow.update_activity(
        op.conn, act.id, {"state": ActivityState.COMPLETED, "completed_at": op.now}
    )
    op.event("review.decided", project_id, record.id, activity_id=act.id, decision=decision)
    if decision == Decision.CHANGES_REQUESTED:
        activities.send_back(op, act.task_id, sub.id)
    else:
        _after_approval(op, act.task_id, sub)
    return Result(
        {"review": decision_view(record), "task": activities.task_now(op, act.task_id)}, status=201
    )


def _after_approval(op: Op, task_id: str, sub: Submission) -> None:
    acts = workflow.activities_of_submission(op.conn, sub.id)
    if not _satisfied(op, sub.id, [a for a in acts if a.kind != ActivityKind.INTEGRATION]):
        return
    task = fetch_row(op.conn, Task, task_id)
    assert task is not None
    amendment = json.loads(sub.ac_amendment_json) if sub.ac_amendment_json else None
    # (once: a submission held for a person after its reviews is approved a second time)
    if amendment and amendment["new"] != json.loads(task.acceptance_json):
        tasks.update_task(
            op.conn,
            task_id,
            TaskChanges(acceptance_json=json.dumps(amendment["new"]), revision=task.revision + 1),
        )
        op.event("task.criteria_amended", task.project_id, task_id, submission_id=sub.id)
    if task.kind == TaskKind.GENERAL:
        activities.complete_task(op, task_id)
        return
    workflow.queue_integration(op.conn, sub.id, op.now)
    tasks.update_task(op.conn, task_id, TaskChanges(phase=Phase.INTEGRATION, updated_at=op.now))


def _satisfied(op: Op, sub_id: str, reviews: list[Activity]) -> bool:
    """Every review slot holds an approval (an approval counts once, for its own slot)."""
    decided = {d.activity_id: d for d in workflow.decisions_of_submission(op.conn, sub_id)}
    return all(a.id in decided and decided[a.id].decision == Decision.APPROVED for a in reviews)


def release_activity(op: Op, project_id: str, activity_id: str, body: ActivityReleaseIn) -> Result:
    act = activities.locked(op, project_id, activity_id)
    if act.current_attempt_id is None:
        raise conflict("lease_expired", "the activity has no attempt")
    att = owned_attempt(op, project_id, act.current_attempt_id, body.generation)
    end_attempt(op, att, AttemptState.RELEASED, body.summary)
    workflow.update_activity(
        op.conn,
        act.id,
        {"state": ActivityState.QUEUED, "current_attempt_id": None, "queued_at": op.now},
    )
    op.event("workflow_activity.released", project_id, act.id, generation=att.generation)
    return Result({"activity": activities.activity_now(op, act.id)})


def review_queue_next(
    conn: Connection,
    project_id: str,
    principal_id: str,
    session_id: str | None,
    is_human: bool,
) -> JsonObject:
    """The next review the caller may take (independent of the task), or none."""
    kinds = [
        k
        for k in ActivityKind
        if k != ActivityKind.INTEGRATION and may_review(k, actor_is_human=is_human)
    ]
    rows = workflow.queued_reviews(conn, project_id, kinds, REVIEW_SCAN)
    for row in rows:
        if leases.contributed(conn, row.task_id, principal_id, session_id or None):
            continue
        action = {
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
        }
        return suggestion(Role.REVIEWER, action, len(rows))
    return suggestion(Role.REVIEWER, None, len(rows))
