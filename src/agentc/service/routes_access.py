"""Public, sign-in, admin and session routes."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agentc import __version__
from agentc.core.errors import CoordinatorError
from agentc.core.model import PrincipalKind
from agentc.service.api import JSON, JsonObject, _dumps, envelope, mutate, new_id, read, runtime_of
from agentc.service.auth import (
    BROWSER_SESSION_MS,
    Actor,
    csrf_token,
    new_secret,
    verifier,
    verify_password,
)
from agentc.service.schemas import AgentIn, LoginIn, SessionIn
from agentc.service.work import accounts
from agentc.store.accounts import BrowserSession, principal_by_name
from agentc.store.sql import insert
from agentc.store.tx import Tx

router = APIRouter()


@router.get("/healthz", tags=["public"])
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/api/v1/info", tags=["public"])
async def info(request: Request) -> Response:
    rt = runtime_of(request)
    data = {
        "service": "agentc coordinator",
        "version": __version__,
        "api_version": 1,
        "public_origin": rt.settings.public_origin,
        "authentication_help": "/api/v1/help/authentication",
    }
    return Response(_dumps(envelope(data, new_id(), rt.executor.clock())), media_type=JSON)


@router.get("/api/v1/help/authentication", tags=["public"])
async def auth_help(request: Request) -> Response:
    rt = runtime_of(request)
    data = {
        "agents": "Send Authorization: Bearer <token>. An operator issues a token with "
        "`agent-coordinator-server issue-credential --agent NAME` or as an admin "
        "through POST /api/v1/admin/agents. Open a session with POST /api/v1/sessions, "
        "sending a proof you made (32 random bytes, hex) alone in X-Coordinator-Session-Proof "
        "so a lost answer can be replayed with the same Idempotency-Key, "
        "and send X-Coordinator-Session and X-Coordinator-Session-Proof afterwards.",
        "humans": "Sign in with POST /api/v1/auth/login; browser writes need Origin, "
        "X-CSRF-Token and Idempotency-Key.",
        "public_registration": False,
    }
    return Response(_dumps(envelope(data, new_id(), rt.executor.clock())), media_type=JSON)


@router.post("/api/v1/auth/login", tags=["access"])
async def login(request: Request, body: LoginIn) -> Response:
    rt = runtime_of(request)
    if request.headers.get("origin") != rt.settings.public_origin:
        raise CoordinatorError(
            "operation_not_permitted",
            "sign-in must come from the configured public origin",
            status=403,
        )
    rt.limiter.check(body.username)
    row = await run_in_threadpool(
        rt.executor.read, lambda tx: principal_by_name(tx.conn, body.username)
    )
    if row is not None and row.kind != PrincipalKind.HUMAN:
        row = None  # agents do not sign in
    ok = await run_in_threadpool(verify_password, row.password_hash if row else None, body.password)
    if not ok or row is None or row.disabled_at is not None:
        raise CoordinatorError("authentication_required", "wrong username or password", status=401)
    cookie = new_secret()
    principal_id = row.id

    def work(tx: Tx) -> int:
        insert(
            tx.conn,
            BrowserSession(
                id=new_id(),
                principal_id=principal_id,
                token_hash=verifier(cookie),
                created_at=tx.now,
                expires_at=tx.now + BROWSER_SESSION_MS,
                revoked_at=None,
            ),
        )
        return tx.now

    now = await asyncio.wrap_future(rt.executor.submit_write(work))
    data = {
        "actor": {"id": row.id, "name": row.name, "role": row.role},
        "csrf_token": csrf_token(cookie),
    }
    resp = Response(_dumps(envelope(data, new_id(), now)), media_type=JSON)
    name = "__Host-coordinator" if rt.settings.https else "coordinator_local"
    resp.set_cookie(
        name,
        cookie,
        max_age=BROWSER_SESSION_MS // 1000,
        path="/",
        httponly=True,
        samesite="strict",
        secure=rt.settings.https,
    )
    return resp


@router.get("/api/v1/me", tags=["access"])
async def me(request: Request) -> Response:
    def fn(_tx: Tx, actor: Actor) -> JsonObject:
        data: JsonObject = {
            "actor": {
                "id": actor.principal_id,
                "name": actor.name,
                "kind": actor.kind,
                "role": actor.role,
                "credential_class": actor.credential_class,
                "access": actor.access,
                "session_id": actor.session_id,
            }
        }
        cookie = request.cookies.get("__Host-coordinator") or request.cookies.get(
            "coordinator_local"
        )
        if actor.is_human and cookie:
            data["csrf_token"] = csrf_token(cookie)
        return data

    return await read(request, fn)


@router.post("/api/v1/admin/agents", tags=["access"], status_code=201)
async def admin_agents(request: Request, body: AgentIn) -> Response:
    return await mutate(request, body, accounts.admin_issue)


@router.post("/api/v1/admin/credentials/{credential_id}/revoke", tags=["access"])
async def admin_revoke(request: Request, credential_id: str) -> Response:
    return await mutate(request, None, lambda op, _b: accounts.revoke_credential(op, credential_id))


@router.post("/api/v1/sessions", tags=["sessions"], status_code=201)
async def open_session(request: Request, body: SessionIn) -> Response:
    return await mutate(request, body, accounts.open_session, lone_proof=True)


@router.get("/api/v1/sessions/{session_id}", tags=["sessions"])
async def get_session(request: Request, session_id: str) -> Response:
    def fn(tx: Tx, actor: Actor) -> JsonObject:
        if not actor.is_human and actor.session_id != session_id:
            raise CoordinatorError(
                "operation_not_permitted", "an agent may read only its own session", status=403
            )
        return accounts.session_view(tx.conn, session_id, tx.now)

    return await read(request, fn)


@router.post("/api/v1/sessions/{session_id}/close", tags=["sessions"])
async def close_session(request: Request, session_id: str) -> Response:
    return await mutate(request, None, lambda op, _b: accounts.close_session(op, session_id))
