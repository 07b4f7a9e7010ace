"""Tasks: creation with admission, editing, cancellation, dependencies."""

from __future__ import annotations

import json

from sqlalchemy.engine import Connection

from agentc.core.errors import CoordinatorError
from agentc.core.model import AdmissionClass, Hold, Lifecycle, Phase, PrincipalKind
from agentc.core.rules import (
    find_cycle,
    iso_week_start_ms,
    parse_task_cursor,
    rfc3339,
    task_cursor,
)
from agentc.core.status import backing_off, fruitless_attempts, parked, work_status
from agentc.service.auth import denied, require_human, require_write
from agentc.service.ops import JsonObject, Op, Result, new_id
from agentc.service.schemas import ApproveIn, CancelIn, TaskEditIn, TaskIn, UnblockIn
from agentc.service.work.refusals import conflict, invalid, missing, project_not_found
from agentc.service.work.views import hold_of, project_row, task_facts, task_row, task_view
from agentc.store import tasks
from agentc.store.projects import Project
from agentc.store.sql import insert
from agentc.store.tasks import Task, TaskChanges

_IN_WORKFLOW = (Phase.REVIEW, Phase.INTEGRATION)


def _check_dependencies(
    conn: Connection, project_id: str, task_id: str, depends_on: list[str]
) -> None:
    if task_id in depends_on:
        raise invalid("depends_on", "a task cannot depend on itself")
    if len(set(depends_on)) != len(depends_on):
        raise invalid("depends_on", "duplicated task id")
    if not depends_on:
        return
    found = tasks.tasks_in_project(conn, project_id, depends_on)
    missing = [d for d in depends_on if d not in found]
    if missing:
        raise invalid("depends_on", f"no task {missing[0]} in this project", missing=missing)
    edges = tasks.dependency_edges(conn, project_id)
    edges[task_id] = list(depends_on)
    cycle = find_cycle(edges, task_id)
    if cycle:
        raise CoordinatorError(
            "dependency_cycle",
            "depends_on would create a cycle: " + " -> ".join(cycle),
            status=422,
            details={"field": "depends_on", "cycle": cycle},
        )


def _admission(op: Op, project: Project, body: TaskIn) -> JsonObject:
    """Agents' tasks wait for a person's approval unless the project admits them, and then
    within a weekly budget per project; canaries from listed principals are exempt."""
    settings = op.runtime.settings
    week = iso_week_start_ms(op.now)
    limit = settings.agent_task_weekly_budget
    admitted = tasks.agent_tasks_admitted_since(op.conn, project.id, week)
    info: JsonObject = {
        "origin": (PrincipalKind.HUMAN if op.actor.is_human else PrincipalKind.AGENT).value,
        "admission_class": body.admission_class,
        "held": False,
        "hold": None,
        "weekly_budget": {
            "limit": limit,
            "admitted_this_week": admitted,
            "week_start": rfc3339(week),
        },
    }
    if body.admission_class == AdmissionClass.CANARY.value:
        if op.actor.is_human or op.actor.name not in settings.canary_principals:
            raise denied(
                "the canary admission class is only for the configured canary agents",
                admission_class=AdmissionClass.CANARY.value,
            )
        info["budget_exempt"] = AdmissionClass.CANARY.value
        return info
    if op.actor.is_human:
        return info
    if not project.admit_agent_tasks:
        return _held(
            info,
            Hold.APPROVAL,
            f"project {project.name} does not admit agent-filed tasks by itself: the task is "
            "proposed until a person approves it",
        )
    if body.planned:
        return info
    if admitted >= limit:
        return _held(
            info,
            Hold.WEEKLY_BUDGET,
            f"this project admitted {admitted} agent tasks this week (the budget is {limit}); "
            "the task is proposed until a person approves it",
        )
    info["weekly_budget"]["admitted_this_week"] = admitted + 1
    return info


def _held(info: JsonObject, hold: Hold, reason: str) -> JsonObject:
    return {**info, "held": True, "hold": hold.value, "reason": reason}


def create_task(op: Op, project_id: str, body: TaskIn) -> Result:
    require_write(op.actor)
    # The project row is locked before the weekly budget is counted, so concurrent creates in
    # one project count one after another (PostgreSQL; SQLite has a single writer).
    project = op.tx.lock(Project, project_id)
    if project is None:
        raise project_not_found(project_id)
    task_id = new_id()
    _check_dependencies(op.conn, project_id, task_id, body.depends_on)
    admission = _admission(op, project, body)
    hold: str | None = admission["hold"]
    agent_admitted = (
        not op.actor.is_human and not body.planned and hold is None and body.admission_class is None
    )
    lifecycle = Lifecycle.PLANNED if body.planned or hold else Lifecycle.OPEN
    insert(
        op.conn,
        Task(
            id=task_id,
            project_id=project_id,
            title=body.title,
            description=body.description,
            acceptance_json=json.dumps(body.acceptance_criteria),
            kind=body.kind,
            priority=body.priority,
            lifecycle=lifecycle.value,
            revision=1,
            generation=0,
            current_attempt_id=None,
            blocked_reason=None,
            ready_since=op.now,
            origin=admission["origin"],
            admission_class=body.admission_class,
            budget_admitted_at=op.now if agent_admitted else None,
            budget_held_at=op.now if hold == Hold.WEEKLY_BUDGET else None,
            proposed_at=op.now if hold == Hold.APPROVAL else None,
            tries=0,
            phase=None,
            current_submission_id=None,
            created_by=op.actor.principal_id,
            created_at=op.now,
            updated_at=op.now,
        ),
    )
    if body.depends_on:
        tasks.set_dependencies(op.conn, task_id, body.depends_on)
    op.event(
        "task.created",
        project_id,
        task_id,
        title=body.title,
        lifecycle=lifecycle,
        admission=admission,
    )
    row = task_row(op.conn, project_id, task_id)
    view = task_view(op.conn, row, op.now, limit=project.park_after_attempts)
    return Result({"task": view, "admission": admission}, status=201)


def locked_task(op: Op, project_id: str, task_id: str, expected_revision: int) -> Task:
    """The project's task, locked, if it is at the revision the caller expects."""
    row = op.tx.lock(Task, task_id)
    if row is None or row.project_id != project_id:
        raise missing(f"no task {task_id}")
    if row.revision != expected_revision:
        raise conflict(
            "revision_conflict",
            f"the task is at revision {row.revision}, not {expected_revision}",
            current_revision=row.revision,
        )
    return row


def _revise(op: Op, row: Task, changes: TaskChanges) -> None:
    """Write a human's change to the task as its next revision."""
    changes["revision"] = row.revision + 1
    changes["updated_at"] = op.now
    tasks.update_task(op.conn, row.id, changes)


def _task_result(op: Op, project: Project, task_id: str) -> Result:
    row = task_row(op.conn, project.id, task_id)
    return Result(task_view(op.conn, row, op.now, limit=project.park_after_attempts))


def _human_edit(
    op: Op, project_id: str, task_id: str, expected_revision: int, what: str
) -> tuple[Project, Task]:
    """The project and its task (locked, at the expected revision) a person changes."""
    require_human(op.actor, what)
    project = project_row(op.conn, project_id)
    return project, locked_task(op, project_id, task_id, expected_revision)


def _opened(op: Op, row: Task) -> TaskChanges:
    """A person opens a planned task: it is ready from now, and no longer waits for approval
    (an agent's proposed task is approved: the `task.approved` event says by whom)."""
    hold = hold_of(row)
    if hold is not None:
        op.event("task.approved", row.project_id, row.id, held_for=hold)
    return TaskChanges(
        lifecycle=Lifecycle.OPEN, ready_since=op.now, proposed_at=None, budget_held_at=None
    )


def edit_task(op: Op, project_id: str, task_id: str, body: TaskEditIn) -> Result:
    project, row = _human_edit(op, project_id, task_id, body.expected_revision, "edit tasks")
    if (
        row.lifecycle not in (Lifecycle.OPEN, Lifecycle.PLANNED)
        or row.current_attempt_id
        or row.phase in _IN_WORKFLOW
    ):
        raise conflict(
            "task_not_editable",
            "only an unowned open or planned task outside review and integration can be edited",
        )
    changes = TaskChanges()
    if body.title is not None:
        changes["title"] = body.title
    if body.description is not None:
        changes["description"] = body.description
    if body.acceptance_criteria is not None:
        changes["acceptance_json"] = json.dumps(body.acceptance_criteria)
    if body.priority is not None:
        changes["priority"] = body.priority
    if body.planned:
        changes["lifecycle"] = Lifecycle.PLANNED
    elif body.planned is not None and row.lifecycle == Lifecycle.PLANNED:
        changes.update(_opened(op, row))
    if body.depends_on is not None:
        _check_dependencies(op.conn, project_id, task_id, body.depends_on)
        tasks.set_dependencies(op.conn, task_id, body.depends_on)
    _revise(op, row, changes)
    op.event(
        "task.edited",
        project_id,
        task_id,
        fields=sorted(body.model_dump(exclude_none=True, exclude={"expected_revision"})),
    )
    return _task_result(op, project, task_id)


def approve_task(op: Op, project_id: str, task_id: str, body: ApproveIn) -> Result:
    """A person approves a task an agent proposed: it goes to the queue."""
    project, row = _human_edit(op, project_id, task_id, body.expected_revision, "approve tasks")
    if hold_of(row) is None:
        status = work_status(task_facts(op.conn, row, limit=project.park_after_attempts), op.now)
        raise conflict(
            "task_not_proposed",
            f"the task is {status.value}: only a proposed task (an agent filed it and it waits "
            "for a person's approval) is approved",
            work_status=status.value,
        )
    _revise(op, row, _opened(op, row))
    return _task_result(op, project, task_id)


def cancel_task(op: Op, project_id: str, task_id: str, body: CancelIn) -> Result:
    project, row = _human_edit(op, project_id, task_id, body.expected_revision, "cancel tasks")
    if row.lifecycle not in (Lifecycle.OPEN, Lifecycle.PLANNED):
        raise conflict("task_lifecycle_invalid", f"the task is {row.lifecycle}")
    if row.current_attempt_id is not None or row.phase in _IN_WORKFLOW:
        raise conflict(
            "task_attempt_protected",
            "the task has an attempt or a submission in progress; release it first",
        )
    _revise(op, row, TaskChanges(lifecycle=Lifecycle.CANCELED, blocked_reason=body.reason))
    op.event("task.canceled", project_id, task_id, reason=body.reason)
    return _task_result(op, project, task_id)


def unblock_task(op: Op, project_id: str, task_id: str, body: UnblockIn) -> Result:
    """A person puts the task back: blocked (by an agent or parked) or backing off, it is on
    offer again at once, its count of fruitless attempts reset."""
    project, row = _human_edit(op, project_id, task_id, body.expected_revision, "unblock tasks")
    facts = task_facts(op.conn, row, limit=project.park_after_attempts)
    fruitless = fruitless_attempts(facts, op.now)
    was_parked = parked(facts, op.now)
    held = row.blocked_reason or was_parked or backing_off(facts, op.now)
    if row.lifecycle != Lifecycle.OPEN or not held:
        raise conflict("task_not_blocked", "the task is not blocked, parked or backing off")
    # An attempt that still holds the task keeps its own try.
    changes = TaskChanges(
        blocked_reason=None, tries=row.tries - fruitless, ready_since=op.now, red_rounds=0
    )
    _revise(op, row, changes)
    op.event(
        "task.unblocked",
        project_id,
        task_id,
        reason=body.reason,
        fruitless_attempts=fruitless,
        parked=was_parked,
    )
    return _task_result(op, project, task_id)


def list_tasks(
    conn: Connection, project_id: str, now: int, limit: int, cursor: str | None, status: str | None
) -> JsonObject:
    park_after = project_row(conn, project_id).park_after_attempts
    after = parse_task_cursor(cursor) if cursor else None
    rows = tasks.task_page(conn, project_id, after, limit + 1)
    items = [task_view(conn, r, now, limit=park_after) for r in rows[:limit]]
    if status:
        items = [t for t in items if t["work_status"] == status]
    last = rows[limit - 1] if len(rows) > limit else None
    return {"items": items, "next_cursor": task_cursor(last.created_at, last.id) if last else None}
