"""The lifecycle every workflow activity shares, reviews and integration alike: locking one
and checking it belongs to the submission the caller names, whether its attempt lapsed, and the
two ways it ends a submission (the task done, or sent back for changes). `workflow` makes
submissions and opens activities; `reviews` and `integration` act on them through this module."""

from __future__ import annotations

from agentc.core import lease
from agentc.core.model import ActivityKind, ActivityState, AttemptState, Lifecycle, Phase
from agentc.service.ops import JsonObject, Op, new_id
from agentc.service.work.refusals import conflict, missing
from agentc.service.work.views import activity_view, task_view
from agentc.store import leases, tasks, workflow
from agentc.store.leases import Attempt
from agentc.store.sql import fetch_row, insert
from agentc.store.tasks import Task, TaskChanges
from agentc.store.workflow import Activity


def task_now(op: Op, task_id: str) -> JsonObject:
    """The task as it stands now in this transaction."""
    task = fetch_row(op.conn, Task, task_id)
    assert task is not None
    return task_view(op.conn, task, op.now)


def activity_now(op: Op, activity_id: str) -> JsonObject:
    """The activity as it stands now in this transaction."""
    act = fetch_row(op.conn, Activity, activity_id)
    assert act is not None
    return activity_view(act)


def complete_task(op: Op, task_id: str) -> None:
    """Done: the task is finished and its dependents' ready clock starts now."""
    tasks.update_task(
        op.conn,
        task_id,
        TaskChanges(
            lifecycle=Lifecycle.DONE, phase=Phase.DONE, blocked_reason=None, updated_at=op.now
        ),
    )
    tasks.restart_dependents(op.conn, task_id, op.now)
    task = fetch_row(op.conn, Task, task_id)
    assert task is not None
    op.event("task.done", task.project_id, task_id)


def locked(op: Op, project_id: str, activity_id: str) -> Activity:
    row = op.tx.lock(Activity, activity_id)
    if row is None or row.project_id != project_id:
        raise missing(f"no workflow activity {activity_id}")
    return row


def check_submission(act: Activity, submission_id: str, /, **details: object) -> None:
    """The caller acts on the submission the activity belongs to, or is refused."""
    if act.submission_id != submission_id:
        raise conflict(
            "workflow_revision_conflict", "the activity belongs to another submission", **details
        )


def lapsed(op: Op, act: Activity) -> bool:
    if act.current_attempt_id is None:
        return True
    att = fetch_row(op.conn, Attempt, act.current_attempt_id)
    assert att is not None
    return att.state != AttemptState.ACTIVE or not lease.is_live(op.now, att.expires_at)


def send_back(op: Op, task_id: str, sub_id: str) -> None:
    """Changes requested (by a review, or by the integrator): the submission is superseded, its
    open activities canceled, and the task is ready again with the reasons on record."""
    for other in workflow.activities_of_submission(op.conn, sub_id, open_only=True):
        if other.current_attempt_id:
            leases.end_if_active(op.conn, other.current_attempt_id, op.now, AttemptState.CANCELED)
        workflow.update_activity(
            op.conn, other.id, {"state": ActivityState.CANCELED, "completed_at": op.now}
        )
    workflow.supersede_submission(op.conn, sub_id, op.now)
    tasks.update_task(
        op.conn,
        task_id,
        TaskChanges(
            phase=Phase.REVISION_NEEDED,
            current_submission_id=None,
            ready_since=op.now,
            updated_at=op.now,
        ),
    )


def open_activity(
    op: Op, project_id: str, task_id: str, sub_id: str, kind: ActivityKind, state: ActivityState
) -> str:
    """A new activity of the submission (``state`` queued, or waiting for the reviews); its id."""
    activity_id = new_id()
    insert(
        op.conn,
        Activity(
            id=activity_id,
            project_id=project_id,
            task_id=task_id,
            submission_id=sub_id,
            kind=kind.value,
            state=state.value,
            generation=0,
            current_attempt_id=None,
            queued_at=op.now,
            created_at=op.now,
            completed_at=None,
            landed_revision=None,
        ),
    )
    return activity_id
