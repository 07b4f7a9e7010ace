"""Tasks: creation with admission, editing, cancellation, dependencies."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from agentc.core.errors import CoordinatorError
from agentc.core.model import Lifecycle
from agentc.core.rules import find_cycle, iso_week_start_ms, rfc3339
from agentc.service.api import Op, Result, new_id
from agentc.service.auth import denied, require_human, require_write
from agentc.service.schemas import CancelIn, TaskEditIn, TaskIn, UnblockIn
from agentc.service.work.views import project_row, task_row, task_view
from agentc.store.schema import task_dependencies, tasks


def _check_dependencies(
    conn: Connection, project_id: str, task_id: str, depends_on: list[str]
) -> None:
    if task_id in depends_on:
        raise CoordinatorError(
            "invalid_input",
            "depends_on: a task cannot depend on itself",
            status=422,
            details={"field": "depends_on"},
        )
    if len(set(depends_on)) != len(depends_on):
        raise CoordinatorError(
            "invalid_input",
            "depends_on: duplicated task id",
            status=422,
            details={"field": "depends_on"},
        )
    if not depends_on:
        return
    found = {
        r.id
        for r in conn.execute(
            select(tasks.c.id).where(tasks.c.id.in_(depends_on), tasks.c.project_id == project_id)
        )
    }
    missing = [d for d in depends_on if d not in found]
    if missing:
        raise CoordinatorError(
            "invalid_input",
            f"depends_on: no task {missing[0]} in this project",
            status=422,
            details={"field": "depends_on", "missing": missing},
        )
    edges: dict[str, list[str]] = {}
    for r in conn.execute(
        select(task_dependencies)
        .join(tasks, tasks.c.id == task_dependencies.c.task_id)
        .where(tasks.c.project_id == project_id)
    ):
        edges.setdefault(r.task_id, []).append(r.prerequisite_id)
    edges[task_id] = list(depends_on)
    cycle = find_cycle(edges, task_id)
    if cycle:
        raise CoordinatorError(
            "dependency_cycle",
            "depends_on would create a cycle: " + " -> ".join(cycle),
            status=422,
            details={"field": "depends_on", "cycle": cycle},
        )


def _admission(op: Op, project_id: str, body: TaskIn) -> dict[str, Any]:
    """Agents get a weekly budget per project; canaries from listed principals are exempt."""
    settings = op.runtime.settings
    week = iso_week_start_ms(op.now)
    limit = settings.agent_task_weekly_budget
    admitted = op.conn.execute(
        select(func.count())
        .select_from(tasks)
        .where(
            tasks.c.project_id == project_id,
            tasks.c.origin == "agent",
            tasks.c.budget_admitted_at >= week,
        )
    ).scalar_one()
    info: dict[str, Any] = {
        "origin": "human" if op.actor.is_human else "agent",
        "admission_class": body.admission_class,
        "held": False,
        "weekly_budget": {
            "limit": limit,
            "admitted_this_week": admitted,
            "week_start": rfc3339(week),
        },
    }
    if body.admission_class == "canary":
        if op.actor.is_human or op.actor.name not in settings.canary_principals:
            raise denied(
                "the canary admission class is only for the configured canary agents",
                admission_class="canary",
            )
        info["budget_exempt"] = "canary"
        return info
    if op.actor.is_human or body.planned:
        return info
    if admitted >= limit:
        info["held"] = True
        info["reason"] = (
            f"this project admitted {admitted} agent tasks this week (the budget is {limit}); "
            "the task is held as planned until a human opens it"
        )
    else:
        info["weekly_budget"]["admitted_this_week"] = admitted + 1
    return info


def create_task(op: Op, project_id: str, body: TaskIn) -> Result:
    require_write(op.actor)
    project_row(op.conn, project_id)
    task_id = new_id()
    _check_dependencies(op.conn, project_id, task_id, body.depends_on)
    admission = _admission(op, project_id, body)
    agent_admitted = (
        not op.actor.is_human
        and not body.planned
        and not admission["held"]
        and body.admission_class is None
    )
    lifecycle = Lifecycle.PLANNED if body.planned or admission["held"] else Lifecycle.OPEN
    op.conn.execute(
        insert(tasks).values(
            id=task_id,
            project_id=project_id,
            title=body.title,
            description=body.description,
            acceptance_json=json.dumps(body.acceptance_criteria),
            kind=body.kind,
            priority=body.priority,
            lifecycle=lifecycle,
            revision=1,
            generation=0,
            ready_since=op.now,
            origin=admission["origin"],
            admission_class=body.admission_class,
            budget_admitted_at=op.now if agent_admitted else None,
            budget_held_at=op.now if admission["held"] else None,
            created_by=op.actor.principal_id,
            created_at=op.now,
            updated_at=op.now,
        )
    )
    if body.depends_on:
        op.conn.execute(
            insert(task_dependencies),
            [{"task_id": task_id, "prerequisite_id": d} for d in body.depends_on],
        )
    op.event(
        "task.created",
        project_id,
        task_id,
        title=body.title,
        lifecycle=lifecycle,
        admission=admission,
    )
    view = task_view(op.conn, task_row(op.conn, project_id, task_id), op.now)
    return Result({"task": view, "admission": admission}, status=201)


def _locked_task(op: Op, project_id: str, task_id: str, expected_revision: int) -> Any:
    project_row(op.conn, project_id)
    row = op.tx.lock(tasks, task_id)
    if row is None or row.project_id != project_id:
        raise CoordinatorError("record_not_found", f"no task {task_id}", status=404)
    if row.revision != expected_revision:
        raise CoordinatorError(
            "revision_conflict",
            f"the task is at revision {row.revision}, not {expected_revision}",
            status=409,
            details={"current_revision": row.revision},
        )
    return row


def edit_task(op: Op, project_id: str, task_id: str, body: TaskEditIn) -> Result:
    require_human(op.actor, "edit tasks")
    row = _locked_task(op, project_id, task_id, body.expected_revision)
    if (
        row.lifecycle not in (Lifecycle.OPEN, Lifecycle.PLANNED)
        or row.current_attempt_id
        or (row.phase in ("review", "integration"))
    ):
        raise CoordinatorError(
            "task_not_editable",
            "only an unowned open or planned task outside review and integration can be edited",
            status=409,
        )
    values: dict[str, Any] = {}
    if body.title is not None:
        values["title"] = body.title
    if body.description is not None:
        values["description"] = body.description
    if body.acceptance_criteria is not None:
        values["acceptance_json"] = json.dumps(body.acceptance_criteria)
    if body.priority is not None:
        values["priority"] = body.priority
    if body.planned is not None:
        values["lifecycle"] = Lifecycle.PLANNED if body.planned else Lifecycle.OPEN
        if not body.planned and row.lifecycle == Lifecycle.PLANNED:
            values["ready_since"] = op.now
    if body.depends_on is not None:
        _check_dependencies(op.conn, project_id, task_id, body.depends_on)
        op.conn.execute(delete(task_dependencies).where(task_dependencies.c.task_id == task_id))
        if body.depends_on:
            op.conn.execute(
                insert(task_dependencies),
                [{"task_id": task_id, "prerequisite_id": d} for d in body.depends_on],
            )
    op.conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(**values, revision=row.revision + 1, updated_at=op.now)
    )
    op.event(
        "task.edited",
        project_id,
        task_id,
        fields=sorted(body.model_dump(exclude_none=True, exclude={"expected_revision"})),
    )
    return Result(task_view(op.conn, task_row(op.conn, project_id, task_id), op.now))


def cancel_task(op: Op, project_id: str, task_id: str, body: CancelIn) -> Result:
    require_human(op.actor, "cancel tasks")
    row = _locked_task(op, project_id, task_id, body.expected_revision)
    if row.lifecycle not in (Lifecycle.OPEN, Lifecycle.PLANNED):
        raise CoordinatorError("task_lifecycle_invalid", f"the task is {row.lifecycle}", status=409)
    if row.current_attempt_id is not None or row.phase in ("review", "integration"):
        raise CoordinatorError(
            "task_attempt_protected",
            "the task has an attempt or a submission in progress; release it first",
            status=409,
        )
    op.conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(
            lifecycle=Lifecycle.CANCELED,
            revision=row.revision + 1,
            updated_at=op.now,
            blocked_reason=body.reason,
        )
    )
    op.event("task.canceled", project_id, task_id, reason=body.reason)
    return Result(task_view(op.conn, task_row(op.conn, project_id, task_id), op.now))


def list_tasks(
    conn: Connection, project_id: str, now: int, limit: int, cursor: str | None, status: str | None
) -> dict[str, Any]:
    project_row(conn, project_id)
    stmt = select(tasks).where(tasks.c.project_id == project_id)
    if cursor:
        created_text, _, last_id = cursor.partition(":")
        if not created_text.isdigit() or not last_id:
            raise CoordinatorError(
                "invalid_input",
                "cursor: not a cursor this service issued",
                status=422,
                details={"field": "cursor"},
            )
        created = int(created_text)
        stmt = stmt.where(
            (tasks.c.created_at > created)
            | ((tasks.c.created_at == created) & (tasks.c.id > last_id))
        )
    rows = conn.execute(stmt.order_by(tasks.c.created_at, tasks.c.id).limit(limit + 1)).all()
    items = [task_view(conn, r, now) for r in rows[:limit]]
    if status:
        items = [t for t in items if t["work_status"] == status]
    last = rows[limit - 1] if len(rows) > limit else None
    return {"items": items, "next_cursor": f"{last.created_at}:{last.id}" if last else None}


def unblock_task(op: Op, project_id: str, task_id: str, body: UnblockIn) -> Result:
    require_human(op.actor, "unblock tasks")
    row = _locked_task(op, project_id, task_id, body.expected_revision)
    if row.blocked_reason is None or row.lifecycle != Lifecycle.OPEN:
        raise CoordinatorError("task_not_blocked", "the task is not blocked", status=409)
    op.conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(
            blocked_reason=None, ready_since=op.now, revision=row.revision + 1, updated_at=op.now
        )
    )
    op.event("task.unblocked", project_id, task_id, reason=body.reason)
    return Result(task_view(op.conn, task_row(op.conn, project_id, task_id), op.now))
