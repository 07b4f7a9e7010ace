"""Tasks and their dependencies: rows and queries."""

from __future__ import annotations

from typing import NamedTuple, TypedDict

from sqlalchemy.engine import Connection

from agentc.core.model import Lifecycle, PrincipalKind
from agentc.store.sql import (
    columns,
    defer,
    fetch_all,
    fetch_in_project,
    fetch_one,
    placeholders,
    run,
    table,
    update,
)


@table("tasks")
class Task(NamedTuple):
    id: str
    project_id: str
    title: str
    description: str
    acceptance_json: str
    kind: str
    priority: int
    lifecycle: str
    revision: int
    generation: int
    current_attempt_id: str | None
    blocked_reason: str | None
    ready_since: int
    origin: str
    admission_class: str | None
    budget_admitted_at: int | None
    budget_held_at: int | None
    proposed_at: int | None
    tries: int
    phase: str | None
    current_submission_id: str | None
    created_by: str
    created_at: int
    updated_at: int
    red_rounds: int = 0  # candidates sent back for a failed check since the last put-back


class _Edge(NamedTuple):
    task_id: str
    prerequisite_id: str


class TaskChanges(TypedDict, total=False):
    title: str
    description: str
    acceptance_json: str
    priority: int
    lifecycle: str
    revision: int
    current_attempt_id: str | None
    current_submission_id: str | None
    blocked_reason: str | None
    ready_since: int
    budget_held_at: int | None
    proposed_at: int | None
    tries: int
    phase: str | None
    updated_at: int
    red_rounds: int


_SELECT = f"SELECT {columns(Task)} FROM tasks"
_ASSIGN = (
    "UPDATE tasks SET generation = :generation, current_attempt_id = :attempt_id, "
    "tries = :tries, updated_at = :now WHERE id = :id"
)
_RELEASE = (
    "UPDATE tasks SET current_attempt_id = NULL, ready_since = :now, updated_at = :now, "
    "blocked_reason = CASE WHEN :blocked THEN :reason ELSE blocked_reason END "
    "WHERE id = :id"
)
_FIRST_PAGE = _SELECT + " WHERE project_id = :project_id ORDER BY created_at, id LIMIT :limit"
_PAGE = _SELECT + (
    " WHERE project_id = :project_id AND (created_at > :created "
    "OR (created_at = :created AND id > :last_id)) ORDER BY created_at, id LIMIT :limit"
)
_ADMITTED = (
    "SELECT count(*) FROM tasks WHERE project_id = :project_id "
    f"AND origin = '{PrincipalKind.AGENT}' AND budget_admitted_at >= :since"
)
_IN_PROJECT_AMONG = "SELECT id FROM tasks WHERE project_id = :project_id AND id IN ({ids})"
_EDGES = (
    "SELECT d.task_id, d.prerequisite_id FROM task_dependencies d "
    "JOIN tasks t ON t.id = d.task_id WHERE t.project_id = :project_id"
)
_CLEAR_DEPENDENCIES = "DELETE FROM task_dependencies WHERE task_id = :task_id"
_ADD_DEPENDENCY = (
    "INSERT INTO task_dependencies (task_id, prerequisite_id) VALUES (:task_id, :prerequisite_id)"
)
_PREREQUISITES = (
    "SELECT d.prerequisite_id, t.lifecycle FROM task_dependencies d "
    "JOIN tasks t ON t.id = d.prerequisite_id WHERE d.task_id = :task_id "
    "ORDER BY d.prerequisite_id"
)
_RESTART_DEPENDENTS = (
    f"UPDATE tasks SET ready_since = :now WHERE lifecycle = '{Lifecycle.OPEN}' AND id IN "
    "(SELECT task_id FROM task_dependencies WHERE prerequisite_id = :id)"
)


def get_project_task(conn: Connection, project_id: str, task_id: str) -> Task | None:
    return fetch_in_project(conn, Task, task_id, project_id)


def update_task(conn: Connection, task_id: str, changes: TaskChanges) -> None:
    update(conn, Task, task_id, changes)


def assign_attempt(
    conn: Connection, task: Task, attempt_id: str, generation: int, now: int
) -> Task:
    """The claim's write: the task's current attempt, its fencing generation and one more try
    (deferred: `agentc.store.sql.defer`; the claim has locked the task). Returns the row as
    written."""
    tries = task.tries + 1
    defer(
        conn,
        _ASSIGN,
        generation=generation,
        attempt_id=attempt_id,
        tries=tries,
        now=now,
        id=task.id,
    )
    return task._replace(
        generation=generation, current_attempt_id=attempt_id, tries=tries, updated_at=now
    )


def release_task(
    conn: Connection, task_id: str, now: int, *, blocked: bool, reason: str | None
) -> None:
    """The attempt let go: the task is ready again (or blocked with the reason). Deferred
    (`agentc.store.sql.defer`)."""
    defer(conn, _RELEASE, now=now, blocked=blocked, reason=reason, id=task_id)


def task_page(
    conn: Connection, project_id: str, after: tuple[int, str] | None, limit: int
) -> list[Task]:
    """Tasks in creation order after the (created_at, id) position, at most limit."""
    if after is None:
        return fetch_all(conn, _FIRST_PAGE, Task, project_id=project_id, limit=limit)
    created, last_id = after
    return fetch_all(
        conn, _PAGE, Task, project_id=project_id, created=created, last_id=last_id, limit=limit
    )


def agent_tasks_admitted_since(conn: Connection, project_id: str, since: int) -> int:
    """Agent-made tasks counted against the budget since the given time."""
    return fetch_one(conn, _ADMITTED, int, project_id=project_id, since=since) or 0


def tasks_in_project(conn: Connection, project_id: str, task_ids: list[str]) -> set[str]:
    """Which of task_ids are tasks of the project."""
    if not task_ids:
        return set()
    marks, params = placeholders("t", task_ids)
    sql = _IN_PROJECT_AMONG.format(ids=marks)
    return set(fetch_all(conn, sql, str, project_id=project_id, **params))


def dependency_edges(conn: Connection, project_id: str) -> dict[str, list[str]]:
    """Every task of the project that has prerequisites, with them."""
    edges: dict[str, list[str]] = {}
    for task_id, prerequisite_id in fetch_all(conn, _EDGES, _Edge, project_id=project_id):
        edges.setdefault(task_id, []).append(prerequisite_id)
    return edges


def set_dependencies(conn: Connection, task_id: str, prerequisites: list[str]) -> None:
    run(conn, _CLEAR_DEPENDENCIES, task_id=task_id)
    for prerequisite_id in prerequisites:
        run(conn, _ADD_DEPENDENCY, task_id=task_id, prerequisite_id=prerequisite_id)


class Prerequisites(NamedTuple):
    """The tasks a task depends on (by id) and whether every one of them is done."""

    ids: list[str]
    done: bool


class _Prerequisite(NamedTuple):
    id: str
    lifecycle: str


def prerequisites(conn: Connection, task_id: str) -> Prerequisites:
    rows = fetch_all(conn, _PREREQUISITES, _Prerequisite, task_id=task_id)
    return Prerequisites([r.id for r in rows], all(r.lifecycle == Lifecycle.DONE for r in rows))


def restart_dependents(conn: Connection, task_id: str, now: int) -> None:
    """The open tasks that depend on task_id are ready from now."""
    run(conn, _RESTART_DEPENDENTS, now=now, id=task_id)


_MAY_NEED_A_HUMAN = _SELECT + (
    " WHERE project_id = :project_id AND ("
    f"(lifecycle = '{Lifecycle.OPEN}' AND (blocked_reason IS NOT NULL "
    "OR current_attempt_id IS NOT NULL OR (:park_after > 0 AND tries >= :park_after))) "
    f"OR (lifecycle = '{Lifecycle.PLANNED}' AND (budget_held_at IS NOT NULL "
    "OR proposed_at IS NOT NULL))) "
    "ORDER BY priority, updated_at, id LIMIT :limit"
)


def tasks_that_may_need_a_human(
    conn: Connection, project_id: str, park_after: int, limit: int
) -> list[Task]:
    """Open tasks blocked with a reason, with a current attempt (it may have lapsed) or with
    park_after tries or more (they may be parked), and planned tasks waiting for a person's
    approval; by priority."""
    return fetch_all(
        conn, _MAY_NEED_A_HUMAN, Task, project_id=project_id, park_after=park_after, limit=limit
    )
