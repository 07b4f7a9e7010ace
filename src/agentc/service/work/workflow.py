"""Submissions: checking one, recording it and opening its review and integration activities
(`activities` holds what those activities share once they are open)."""

from __future__ import annotations

import json

from agentc.core.model import (
    CANDIDATE_REF_PREFIX,
    ActivityKind,
    ActivityState,
    AttemptState,
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
from agentc.service.ops import JsonObject, Op, Result, new_id
from agentc.service.schemas import SubmissionIn
from agentc.service.work import activities
from agentc.service.work.leases import checkout_view, contribute, end_attempt, owned_attempt
from agentc.service.work.refusals import conflict, invalid
from agentc.service.work.views import (
    activity_view,
    project_row,
    submission_view,
)
from agentc.store import tasks, workflow
from agentc.store.leases import Attempt
from agentc.store.projects import Project
from agentc.store.sql import fetch_row, insert
from agentc.store.tasks import Task, TaskChanges
from agentc.store.workflow import Submission


def submit(op: Op, project_id: str, attempt_id: str, body: SubmissionIn) -> Result:
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    if row.activity_id is not None:
        raise conflict("activity_attempt", "review attempts decide, not submit")
    task = op.tx.lock(Task, row.task_id)
    assert task is not None
    project = project_row(op.conn, project_id)
    amendment = _check_submission(op, project, task, row, body)
    sub_id = _record_submission(op, task, row, body, amendment)
    end_attempt(op, row, AttemptState.SUBMITTED, body.handoff or None)
    contribute(op, task.id, row.session_id)
    in_review = _open_activities(op, project, task, sub_id)
    # A submission is progress: the count of fruitless attempts starts again.
    changes = TaskChanges(
        current_attempt_id=None, current_submission_id=sub_id, tries=0, updated_at=op.now
    )
    if in_review:
        changes["phase"] = Phase.REVIEW
    elif task.kind == TaskKind.CODE:
        changes["phase"] = Phase.INTEGRATION
    tasks.update_task(op.conn, task.id, changes)
    op.event(
        "submission.created",
        project_id,
        sub_id,
        task_id=task.id,
        attempt_id=attempt_id,
        generation=row.generation,
    )
    if not in_review and task.kind == TaskKind.GENERAL:
        activities.complete_task(op, task.id)
    return Result(_submission_result(op, task.id, sub_id), status=201)


def _check_submission(
    op: Op, project: Project, task: Task, attempt: Attempt, body: SubmissionIn
) -> JsonObject | None:
    """Refuse a submission that does not fit the task; returns the criteria amendment it
    proposes, if any."""
    if body.kind != task.kind:
        raise invalid("kind", f"the task is a {task.kind} task")
    if task.revision != attempt.task_revision:
        raise conflict(
            "pinned_revision_changed",
            "the task was edited after this attempt claimed it",
            claimed_revision=attempt.task_revision,
            current_revision=task.revision,
        )
    criteria: list[str] = json.loads(task.acceptance_json)
    amendment = _amendment(project, criteria, body)
    if amendment is not None:
        criteria = amendment["new"]
    check_evidence(criteria, [(e.criterion, e.evidence) for e in body.acceptance_evidence])
    if task.kind == TaskKind.CODE.value:  # (narrowed to the body's literal kinds above)
        _check_candidate(op, attempt.id, body)
    elif body.candidate_ref or body.candidate_revision or body.base_revision:
        raise invalid("candidate_ref", "general submissions carry no git fields")
    return amendment


def _amendment(project: Project, criteria: list[str], body: SubmissionIn) -> JsonObject | None:
    """The acceptance-criteria change the submission proposes (old, new, rationale), if any."""
    if body.ac_amendment is None:
        return None
    if project.review_mode == ReviewMode.NONE:
        raise conflict(
            "amendment_requires_review",
            "an acceptance-criteria amendment needs a review, and this project has none",
        )
    if body.ac_amendment.new == criteria:
        raise invalid("ac_amendment.new", "equals the criteria")
    return {"old": criteria, "new": body.ac_amendment.new, "rationale": body.ac_amendment.rationale}


def _check_candidate(op: Op, attempt_id: str, body: SubmissionIn) -> None:
    """A code submission names its candidate commit on the attempt's registered base."""
    check_candidate_ref(body.candidate_ref, CANDIDATE_REF_PREFIX)
    check_revision_sha("candidate_revision", body.candidate_revision)
    check_revision_sha("base_revision", body.base_revision)
    checkout = checkout_view(op.conn, attempt_id)
    if checkout is not None and checkout["base_revision"] != body.base_revision:
        raise conflict(
            "base_revision_mismatch",
            "base_revision differs from the base of the attempt's registered checkout",
            checkout_base_revision=checkout["base_revision"],
        )


def _record_submission(
    op: Op, task: Task, attempt: Attempt, body: SubmissionIn, amendment: JsonObject | None
) -> str:
    """The submission, superseding the task's previous one; returns its id."""
    if task.current_submission_id:
        workflow.supersede_submission(op.conn, task.current_submission_id, op.now)
    sub_id = new_id()
    insert(
        op.conn,
        Submission(
            id=sub_id,
            task_id=task.id,
            attempt_id=attempt.id,
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
            session_id=attempt.session_id,
            created_at=op.now,
            superseded_at=None,
        ),
    )
    return sub_id


def _open_activities(op: Op, project: Project, task: Task, sub_id: str) -> bool:
    """The submission's review and integration activities (integration waits for the
    reviews); returns whether there are reviews."""
    kinds = review_activities(ReviewMode(project.review_mode), TaskKind(task.kind))
    reviews = [k for k in kinds if k != ActivityKind.INTEGRATION]
    for kind in kinds:
        waiting = kind == ActivityKind.INTEGRATION and reviews
        state = ActivityState.WAITING if waiting else ActivityState.QUEUED
        activities.open_activity(op, project.id, task.id, sub_id, kind, state)
    return bool(reviews)


def _submission_result(op: Op, task_id: str, sub_id: str) -> JsonObject:
    sub = fetch_row(op.conn, Submission, sub_id)
    assert sub is not None
    return {
        "submission": submission_view(sub),
        "activities": [
            activity_view(a) for a in workflow.activities_of_submission(op.conn, sub_id)
        ],
        "task": activities.task_now(op, task_id),
    }
