"""Project, task, lease, workflow, telemetry and event routes (all under /api/v1/projects)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy.engine import Connection
from starlette.responses import Response

from agentc.core.model import COUNTER_MAX, PAGE_LIMIT_MAX, Role, TelemetryStream
from agentc.core.rules import rfc3339
from agentc.service.api import B, JsonObject, Op, Result, mutate, read, runtime_of
from agentc.service.auth import Actor, visible_projects
from agentc.service.request import ApiRoute
from agentc.service.schemas import (
    ActivityClaimIn,
    ActivityReleaseIn,
    CancelIn,
    CheckoutIn,
    CheckpointIn,
    ClaimIn,
    GenerationIn,
    LandingIn,
    PolicyIn,
    ProjectIn,
    ReleaseIn,
    ReviewIn,
    SendBackIn,
    SubmissionIn,
    TaskEditIn,
    TaskIn,
    TelemetryIn,
    UnblockIn,
)
from agentc.service.work import (
    attention,
    integration,
    leases,
    projects,
    reviews,
    tasks,
    telemetry,
    workflow,
)
from agentc.service.work.views import (
    project_row,
    project_view,
    task_detail,
    task_row,
    workflow_view,
)
from agentc.store.audit import events_after
from agentc.store.tasks import Task
from agentc.store.tx import Tx

router = APIRouter(prefix="/api/v1/projects", route_class=ApiRoute)
P = "/{project_id}"
Limit = Annotated[int, Query(ge=1, le=PAGE_LIMIT_MAX)]


def _on(
    fn: Callable[[Op, str, str, B], Result], project_id: str, record_id: str
) -> Callable[[Op, B], Result]:
    """The operation fn on one record of the project (both ids from the path)."""
    return lambda op, body: fn(op, project_id, record_id, body)


async def _read_task(
    request: Request,
    project_id: str,
    task_id: str,
    view: Callable[[Connection, Task, int], JsonObject],
) -> Response:
    """A read of one task of the project, shown by view."""

    def fn(tx: Tx, _actor: Actor) -> JsonObject:
        project_row(tx.conn, project_id)
        return view(tx.conn, task_row(tx.conn, project_id, task_id), tx.now)

    return await read(request, fn)


@router.get("", tags=["projects"])
async def list_projects(request: Request) -> Response:
    def fn(tx: Tx, actor: Actor) -> JsonObject:
        items = [project_view(r) for r in visible_projects(tx.conn, actor)]
        return {"items": items, "next_cursor": None}

    return await read(request, fn)


@router.post("", tags=["projects"], status_code=201)
async def create_project(request: Request, body: ProjectIn) -> Response:
    return await mutate(request, body, projects.create_project)


@router.get(P, tags=["projects"])
async def get_project(request: Request, project_id: str) -> Response:
    return await read(request, lambda tx, _a: project_view(project_row(tx.conn, project_id)))


@router.get(P + "/attention", tags=["projects"])
async def get_attention(request: Request, project_id: str) -> Response:
    weekly_budget = runtime_of(request).settings.agent_task_weekly_budget

    def fn(tx: Tx, actor: Actor) -> JsonObject:
        project_row(tx.conn, project_id)
        attention.may_read(tx.conn, actor, project_id)
        return attention.digest(tx.conn, project_id, tx.now, weekly_budget)

    return await read(request, fn)


@router.patch(P + "/policy", tags=["projects"])
async def update_policy(request: Request, project_id: str, body: PolicyIn) -> Response:
    return await mutate(request, body, lambda op, b: projects.update_policy(op, project_id, b))


@router.get(P + "/tasks", tags=["tasks"])
async def list_tasks(
    request: Request,
    project_id: str,
    limit: Limit = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    work_status: Annotated[str | None, Query(max_length=40)] = None,
) -> Response:
    return await read(
        request,
        lambda tx, _a: tasks.list_tasks(tx.conn, project_id, tx.now, limit, cursor, work_status),
    )


@router.post(P + "/tasks", tags=["tasks"], status_code=201)
async def create_task(request: Request, project_id: str, body: TaskIn) -> Response:
    return await mutate(request, body, lambda op, b: tasks.create_task(op, project_id, b))


@router.get(P + "/tasks/{task_id}", tags=["tasks"])
async def get_task(request: Request, project_id: str, task_id: str) -> Response:
    return await _read_task(request, project_id, task_id, task_detail)


@router.patch(P + "/tasks/{task_id}", tags=["tasks"])
async def edit_task(request: Request, project_id: str, task_id: str, body: TaskEditIn) -> Response:
    return await mutate(request, body, _on(tasks.edit_task, project_id, task_id))


@router.post(P + "/tasks/{task_id}/cancel", tags=["tasks"])
async def cancel_task(request: Request, project_id: str, task_id: str, body: CancelIn) -> Response:
    return await mutate(request, body, _on(tasks.cancel_task, project_id, task_id))


@router.post(P + "/tasks/{task_id}/unblock", tags=["tasks"])
async def unblock_task(
    request: Request, project_id: str, task_id: str, body: UnblockIn
) -> Response:
    return await mutate(request, body, _on(tasks.unblock_task, project_id, task_id))


@router.get(P + "/tasks/{task_id}/workflow", tags=["workflow"])
async def get_workflow(request: Request, project_id: str, task_id: str) -> Response:
    return await _read_task(request, project_id, task_id, workflow_view)


@router.get(P + "/next", tags=["leases"])
async def next_action(request: Request, project_id: str, role: Role = Role.IMPLEMENTER) -> Response:
    def fn(tx: Tx, actor: Actor) -> JsonObject:
        if role == Role.REVIEWER:
            project_row(tx.conn, project_id)
            return reviews.review_queue_next(
                tx.conn, project_id, actor.principal_id, actor.session_id, actor.is_human
            )
        return leases.next_action(tx.conn, project_id, tx.now, actor)

    return await read(request, fn)


@router.post(P + "/claims", tags=["leases"], status_code=201)
async def claim(request: Request, project_id: str, body: ClaimIn) -> Response:
    return await mutate(request, body, lambda op, b: leases.claim(op, project_id, b))


@router.get(P + "/attempts/{attempt_id}", tags=["leases"])
async def get_attempt(request: Request, project_id: str, attempt_id: str) -> Response:
    return await read(
        request, lambda tx, _a: leases.attempt_detail(tx.conn, project_id, attempt_id, tx.now)
    )


@router.post(P + "/attempts/{attempt_id}/renew", tags=["leases"])
async def renew(request: Request, project_id: str, attempt_id: str, body: GenerationIn) -> Response:
    return await mutate(request, body, _on(leases.renew, project_id, attempt_id))


@router.post(P + "/attempts/{attempt_id}/checkpoints", tags=["leases"], status_code=201)
async def checkpoint(
    request: Request, project_id: str, attempt_id: str, body: CheckpointIn
) -> Response:
    return await mutate(request, body, _on(leases.checkpoint, project_id, attempt_id))


@router.post(P + "/attempts/{attempt_id}/release", tags=["leases"])
async def release(request: Request, project_id: str, attempt_id: str, body: ReleaseIn) -> Response:
    return await mutate(request, body, _on(leases.release, project_id, attempt_id))


@router.post(P + "/attempts/{attempt_id}/checkout", tags=["leases"], status_code=201)
async def register_checkout(
    request: Request, project_id: str, attempt_id: str, body: CheckoutIn
) -> Response:
    return await mutate(request, body, _on(leases.register_checkout, project_id, attempt_id))


@router.post(P + "/attempts/{attempt_id}/submissions", tags=["workflow"], status_code=201)
async def submit(
    request: Request, project_id: str, attempt_id: str, body: SubmissionIn
) -> Response:
    return await mutate(request, body, _on(workflow.submit, project_id, attempt_id))


A = P + "/workflow-activities/{activity_id}"


@router.post(A + "/claim", tags=["workflow"], status_code=201)
async def claim_activity(
    request: Request, project_id: str, activity_id: str, body: ActivityClaimIn
) -> Response:
    return await mutate(request, body, _on(reviews.claim_activity, project_id, activity_id))


@router.post(A + "/review", tags=["workflow"], status_code=201)
async def review(request: Request, project_id: str, activity_id: str, body: ReviewIn) -> Response:
    return await mutate(request, body, _on(reviews.decide, project_id, activity_id))


@router.post(A + "/release", tags=["workflow"])
async def release_activity(
    request: Request, project_id: str, activity_id: str, body: ActivityReleaseIn
) -> Response:
    return await mutate(request, body, _on(reviews.release_activity, project_id, activity_id))


@router.post(A + "/landing", tags=["workflow"])
async def landing(request: Request, project_id: str, activity_id: str, body: LandingIn) -> Response:
    return await mutate(request, body, _on(integration.record_landing, project_id, activity_id))


@router.post(A + "/send-back", tags=["workflow"])
async def send_back(
    request: Request, project_id: str, activity_id: str, body: SendBackIn
) -> Response:
    return await mutate(request, body, _on(integration.send_back, project_id, activity_id))


@router.post(P + "/telemetry/cost-rows", tags=["telemetry"])
async def cost_rows(request: Request, project_id: str, body: TelemetryIn) -> Response:
    return await mutate(
        request, body, lambda op, b: telemetry.record(op, project_id, TelemetryStream.COST, b)
    )


@router.post(P + "/telemetry/canary-results", tags=["telemetry"])
async def canary_results(request: Request, project_id: str, body: TelemetryIn) -> Response:
    return await mutate(
        request, body, lambda op, b: telemetry.record(op, project_id, TelemetryStream.CANARY, b)
    )


@router.get(P + "/events", tags=["events"])
async def list_events(
    request: Request,
    project_id: str,
    limit: Limit = 100,
    cursor: Annotated[int, Query(ge=0, le=COUNTER_MAX)] = 0,
) -> Response:
    def fn(tx: Tx, _actor: Actor) -> JsonObject:
        project_row(tx.conn, project_id)
        rows = events_after(tx.conn, project_id, cursor, limit)
        items = [
            {
                "seq": r.seq,
                "kind": r.kind,
                "actor_id": r.actor_id,
                "credential_class": r.credential_class,
                "record_id": r.record_id,
                "data": json.loads(r.data_json),
                "created_at": rfc3339(r.created_at),
            }
            for r in rows
        ]
        return {"items": items, "next_cursor": rows[-1].seq if len(rows) == limit else None}

    return await read(request, fn)
