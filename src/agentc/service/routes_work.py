"""Project, task, lease, workflow, telemetry and event routes (all under /api/v1/projects)."""

from __future__ import annotations

import json
from collections.abc import Callable
from inspect import Parameter, Signature
from typing import Annotated, TypeVar

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from sqlalchemy.engine import Connection
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agentc.core.model import COUNTER_MAX, PAGE_LIMIT_MAX, Role, TelemetryStream
from agentc.core.rules import rfc3339
from agentc.service import backup
from agentc.service.api import mutate, read, runtime_of
from agentc.service.auth import Actor, visible_projects
from agentc.service.lane import LaneRoute, lane_route
from agentc.service.ops import JsonObject, Op, Result
from agentc.service.request import ApiRoute
from agentc.service.schemas import (
    ActivityClaimIn,
    ActivityReleaseIn,
    ApproveIn,
    CancelIn,
    CheckoutIn,
    CheckpointIn,
    ClaimIn,
    GenerationIn,
    HoldIn,
    LandingIn,
    PolicyIn,
    ProjectIn,
    ReleaseIn,
    RenewIn,
    ReviewIn,
    SendBackIn,
    SubmissionIn,
    TargetRedIn,
    TaskEditIn,
    TaskIn,
    TelemetryIn,
    UnblockIn,
)
from agentc.service.work import (
    artifacts,
    attention,
    digest_link,
    integration,
    launch_access,
    launch_log,
    leases,
    model_policy,
    projects,
    provenance,
    reviews,
    steps,
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
T = P + "/tasks/{task_id}"
AT = P + "/attempts/{attempt_id}"
A = P + "/workflow-activities/{activity_id}"
Limit = Annotated[int, Query(ge=1, le=PAGE_LIMIT_MAX)]

M = TypeVar("M", bound=BaseModel)
LANE: list[LaneRoute] = []  # the lease routes, also answered by the lease lane (lane.py)


def _record_route(
    method: str,
    path: str,
    tag: str,
    op: Callable[[Op, str, str, M], Result],
    model: type[M],
    *,
    name: str | None = None,
    status_code: int = 200,
    lane: bool = False,
) -> None:
    """Route ``method path`` to the mutation ``op`` on one record of the project, its body a
    ``model``. Every such route has the one handler below: ``op`` with both ids from the path
    (the record's is the path's last parameter). ``name`` names the endpoint in the API schema
    (default: the operation's name); ``lane`` puts it in the lease lane too."""
    record = path.rsplit("{", 1)[1].split("}", 1)[0]

    async def endpoint(request: Request, project_id: str, body: M, **ids: str) -> Response:
        record_id = ids[record]
        return await mutate(request, body, lambda o, b: op(o, project_id, record_id, b))

    # FastAPI reads the parameters (path ids, body model) from the signature.
    keyword = Parameter.POSITIONAL_OR_KEYWORD
    endpoint.__signature__ = Signature(  # type: ignore[attr-defined]
        [
            Parameter("request", keyword, annotation=Request),
            Parameter("project_id", keyword, annotation=str),
            Parameter(record, keyword, annotation=str),
            Parameter("body", keyword, annotation=model),
        ],
        return_annotation=Response,
    )
    endpoint.__name__ = endpoint.__qualname__ = name or op.__name__
    router.add_api_route(path, endpoint, methods=[method], tags=[tag], status_code=status_code)
    if lane:
        LANE.append(lane_route(method, router.prefix + path, model, endpoint))


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


# The lease routes come first: a request is matched against the routes in the order they are
# declared (FastAPI checks them twice, once to pick this router and once to dispatch), and
# agents' claims and renewals are most of the traffic. No other route's path overlaps them.
@router.post(P + "/claims", tags=["leases"], status_code=201)
async def claim(request: Request, project_id: str, body: ClaimIn) -> Response:
    return await mutate(request, body, lambda op, b: leases.claim(op, project_id, b))


LANE.append(lane_route("POST", router.prefix + P + "/claims", ClaimIn, claim))
_record_route("POST", AT + "/renew", "leases", leases.renew, RenewIn, lane=True)
_record_route(
    "POST",
    AT + "/checkpoints",
    "leases",
    leases.checkpoint,
    CheckpointIn,
    status_code=201,
    lane=True,
)
_record_route("POST", AT + "/release", "leases", leases.release, ReleaseIn, lane=True)


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


@router.get(P + "/attention/backups", tags=["projects"])
async def get_backup_status(request: Request, project_id: str) -> Response:
    configured = runtime_of(request).settings.backup_repository

    def fn(tx: Tx, actor: Actor) -> JsonObject:
        project_row(tx.conn, project_id)
        attention.may_read_backups(tx.conn, actor, project_id)
        return backup.summary(backup.installation_status(configured, tx.now))

    return await read(request, fn)


@router.get(P + "/digest/read-link", tags=["projects"])
async def digest_read_link(request: Request, project_id: str) -> Response:
    rt = runtime_of(request)
    origin = rt.settings.public_origin
    if not await run_in_threadpool(rt.executor.read, lambda tx: digest_link.has_key(tx.conn)):
        await rt.executor.write_async(lambda tx: digest_link.key_made(tx.conn))

    def fn(tx: Tx, actor: Actor) -> JsonObject:
        return digest_link.mint(tx.conn, actor, project_id, tx.now, origin)

    return await read(request, fn)


@router.patch(P + "/policy", tags=["projects"])
async def update_policy(request: Request, project_id: str, body: PolicyIn) -> Response:
    return await mutate(request, body, lambda op, b: projects.update_policy(op, project_id, b))


@router.get(P + "/model-policy", tags=["projects"])
async def get_project_model_policy(request: Request, project_id: str) -> Response:
    return await read(request, lambda tx, _a: model_policy.project_policy(tx, project_id))


@router.put(P + "/model-policy", tags=["projects"])
async def set_project_model_policy(
    request: Request, project_id: str, body: model_policy.ModelPolicyIn
) -> Response:
    return await mutate(
        request, body, lambda op, b: model_policy.set_project_policy(op, project_id, b)
    )


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


@router.get(T, tags=["tasks"])
async def get_task(request: Request, project_id: str, task_id: str) -> Response:
    return await _read_task(request, project_id, task_id, task_detail)


_record_route("PATCH", T, "tasks", tasks.edit_task, TaskEditIn)
_record_route("POST", T + "/cancel", "tasks", tasks.cancel_task, CancelIn)
_record_route("POST", T + "/unblock", "tasks", tasks.unblock_task, UnblockIn)
_record_route("POST", T + "/approve", "tasks", tasks.approve_task, ApproveIn)


@router.get(T + "/model-policy", tags=["tasks"])
async def get_task_model_policy(request: Request, project_id: str, task_id: str) -> Response:
    return await read(request, lambda tx, _a: model_policy.task_policy(tx, project_id, task_id))


_record_route(
    "PUT",
    T + "/model-policy",
    "tasks",
    model_policy.set_task_policy,
    model_policy.ModelPolicyIn,
    name="set_task_model_policy",
)


@router.get(T + "/workflow", tags=["workflow"])
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


@router.get(AT, tags=["leases"])
async def get_attempt(request: Request, project_id: str, attempt_id: str) -> Response:
    return await read(
        request, lambda tx, _a: leases.attempt_detail(tx.conn, project_id, attempt_id, tx.now)
    )


_record_route(
    "POST", AT + "/checkout", "leases", leases.register_checkout, CheckoutIn, status_code=201
)
_record_route(
    "POST",
    AT + "/credentials",
    "leases",
    launch_access.mint,
    GenerationIn,
    name="mint_attempt_credential",
    status_code=201,
)
_record_route(
    "POST",
    AT + "/credentials/revoke",
    "leases",
    launch_access.revoke,
    GenerationIn,
    name="revoke_attempt_credentials",
)
_record_route(
    "POST", AT + "/submissions", "workflow", workflow.submit, SubmissionIn, status_code=201
)


def _artifact_routes(
    kind: str,
    reader: Callable[[Connection, str, str], JsonObject],
    recorder: Callable[[Op, str, str, M], Result],
    body: type[M],
) -> None:
    """An attempt's artifact ``kind``: ``GET`` reads it, ``POST`` records it (once)."""
    name = kind.replace("-", "_")

    async def endpoint(request: Request, project_id: str, attempt_id: str) -> Response:
        return await read(request, lambda tx, _a: reader(tx.conn, project_id, attempt_id))

    path = f"{AT}/artifacts/{kind}"
    router.add_api_route(path, endpoint, methods=["GET"], tags=["workflow"], name=f"get_{name}")
    _record_route("POST", path, "workflow", recorder, body, name=f"record_{name}", status_code=201)


_artifact_routes("patch", artifacts.read_patch, artifacts.record_patch, artifacts.PatchIn)
_artifact_routes("steps", steps.read_steps, steps.record_steps, steps.StepsIn)
_artifact_routes(
    "launch-log", launch_log.read_launch_log, launch_log.record_launch_log, launch_log.LaunchLogIn
)
_record_route(
    "POST", A + "/claim", "workflow", reviews.claim_activity, ActivityClaimIn, status_code=201
)
_record_route(
    "POST", A + "/review", "workflow", reviews.decide, ReviewIn, name="review", status_code=201
)
_record_route("POST", A + "/release", "workflow", reviews.release_activity, ActivityReleaseIn)
_record_route(
    "POST", A + "/landing", "workflow", integration.record_landing, LandingIn, name="landing"
)
_record_route("POST", A + "/send-back", "workflow", integration.send_back, SendBackIn)


_record_route("POST", A + "/hold", "workflow", integration.hold, HoldIn)


@router.get(A + "/known-secrets", tags=["workflow"])
async def get_known_secrets(
    request: Request,
    project_id: str,
    activity_id: str,
    verifiers: Annotated[str, Query(max_length=64 * 65)] = "",
) -> Response:
    def fn(tx: Tx, actor: Actor) -> JsonObject:
        return integration.known_secrets(tx.conn, actor, project_id, activity_id, verifiers, tx.now)

    return await read(request, fn)


@router.get(A + "/provenance", tags=["workflow"])
async def get_provenance(request: Request, project_id: str, activity_id: str) -> Response:
    return await read(
        request, lambda tx, _a: provenance.provenance(tx.conn, project_id, activity_id)
    )


@router.get(P + "/integration/queue", tags=["workflow"])
async def landing_queue(request: Request, project_id: str, limit: Limit = 200) -> Response:
    return await read(request, lambda tx, _a: integration.landing_queue(tx.conn, project_id, limit))


@router.post(P + "/integration/target-red", tags=["workflow"])
async def target_red(request: Request, project_id: str, body: TargetRedIn) -> Response:
    return await mutate(request, body, lambda op, b: integration.target_red(op, project_id, b))


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
