"""Public, sign-in, admin and session routes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agentc import __version__
from agentc.core.browser import cookie_name
from agentc.core.errors import CoordinatorError
from agentc.core.model import PrincipalRole
from agentc.core.wire import Body, ByValue, text
from agentc.service.api import (
    JSON,
    _dumps,
    authorized,
    envelope,
    mutate,
    operation_of,
    presented,
    read,
    runtime_of,
)
from agentc.service.auth import (
    Actor,
    Presented,
    authenticate,
    browser_cookie,
    csrf_token,
    hash_password,
    require_admin,
    unauthenticated,
    verifier,
    visible_projects,
)
from agentc.service.hosts import Under
from agentc.service.limiter import Client
from agentc.service.ops import JsonObject, Runtime, new_id
from agentc.service.request import ApiRoute
from agentc.service.schemas import AgentIn, GrantIn, LoginIn, Name, SessionIn
from agentc.service.signin import (
    check_current_password,
    check_origin,
    client_of,
    set_session_cookie,
    sign_in,
)
from agentc.service.work import accounts
from agentc.service.work import grants as project_grants
from agentc.service.work.refusals import not_found
from agentc.store import grants
from agentc.store.accounts import Principal, end_browser_session
from agentc.store.sql import fetch_row
from agentc.store.tx import Tx

router = APIRouter(route_class=ApiRoute)
T = TypeVar("T")


class PersonIn(Body):
    """The receipt's fingerprint covers name and role; the password is hashed apart."""

    name: Name
    role: ByValue[PrincipalRole] = PrincipalRole.OPERATOR


class NewPersonIn(PersonIn):
    password: Annotated[str, text(1024, min_length=1)]


class PasswordIn(Body):
    current_password: Annotated[str, text(1024, min_length=1)]
    new_password: Annotated[str, text(1024, min_length=1)]


@router.get("/healthz", tags=["public"])
async def healthz(request: Request) -> Response:
    """200 ``ok``; 503 with the reason while writes are paused (agentc.store.clock)."""
    reason = runtime_of(request).executor.time.reason()
    if reason is None:
        return Response(b'{"status":"ok"}', media_type="application/json")
    body = json.dumps({"status": "clock_reconciliation_required", "reason": reason})
    return Response(body.encode(), status_code=503, media_type="application/json")


@router.get("/api/v1/info", tags=["public"])
async def info(request: Request) -> Response:
    """The public origin is named only to a request made under it: under `agentc up` its name
    is the secret that keeps the console's cookies from other servers on the machine."""
    rt = runtime_of(request)
    under = rt.hosts.under(request.headers.get("host", "").encode("latin-1") or None)
    data = {
        "service": "agentc coordinator",
        "version": __version__,
        "api_version": 1,
        "public_origin": rt.settings.public_origin if under is Under.CONSOLE else None,
        "authentication_help": "/api/v1/help/authentication",
    }
    return Response(_dumps(envelope(data, new_id(), rt.executor.clock())), media_type=JSON)


@router.get("/api/v1/help/authentication", tags=["public"])
async def auth_help(request: Request) -> Response:
    rt = runtime_of(request)
    data = {
        "agents": "Send Authorization: Bearer <token>. An operator issues a token with "
        "`agent-coordinator-server issue-credential --agent NAME --project PROJECT` or as an "
        "admin through POST /api/v1/admin/agents; an agent reaches only the projects granted "
        "to it. Open a session with POST /api/v1/sessions, "
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
    """A session for a program that signs in as a person (the console's own sign-in is its
    form, which also sets the device cookie); a device cookie it sends is honored."""
    rt = runtime_of(request)
    check_origin(rt, request, "sign-in")
    done = await sign_in(rt, body.username, body.password, client_of(rt, request))
    data = {"actor": done.actor, "csrf_token": csrf_token(done.cookie)}
    resp = Response(_dumps(envelope(data, new_id(), done.now)), media_type=JSON)
    set_session_cookie(rt, resp, done.cookie)
    return resp


async def browser_write(rt: Runtime, creds: Presented, fn: Callable[[Tx, Actor, str], T]) -> T:
    """A browser-session write outside the receipts (sign-out, password): the same cookie,
    Origin and CSRF checks as every write, under the write lock."""
    origin = rt.settings.public_origin

    def work(tx: Tx) -> T:
        actor = authenticate(tx.conn, creds, tx.now, write=True, public_origin=origin)
        if not actor.is_human or creds.cookie is None:
            raise CoordinatorError(
                "operation_not_permitted", "this is for signed-in people", status=403
            )
        return fn(tx, actor, verifier(creds.cookie))

    return await rt.executor.write_async(work)


async def sign_out(rt: Runtime, creds: Presented) -> None:
    def fn(tx: Tx, _actor: Actor, token_hash: str) -> None:
        end_browser_session(tx.conn, token_hash)

    await browser_write(rt, creds, fn)


async def change_password(
    rt: Runtime, creds: Presented, current: str, new: str, client: Client
) -> None:
    """Check the current password (throttled as a sign-in is), store the new one, end the
    person's other sessions. The new password is hashed only once the current one checked."""
    origin = rt.settings.public_origin

    def who(tx: Tx) -> Principal:
        actor = authenticate(tx.conn, creds, tx.now, write=True, public_origin=origin)
        row = fetch_row(tx.conn, Principal, actor.principal_id)
        if row is None or not actor.is_human:
            raise CoordinatorError(
                "operation_not_permitted", "this is for signed-in people", status=403
            )
        return row

    person = await run_in_threadpool(rt.executor.read, who)
    device = await check_current_password(rt, person, current, client)
    new_hash = await run_in_threadpool(hash_password, new)

    def fn(tx: Tx, actor: Actor, token_hash: str) -> None:
        if actor.principal_id != person.id:
            raise unauthenticated("the browser session changed; sign in again")
        rt.limiter.succeeded(tx.conn, device)
        accounts.change_password(tx.conn, tx.now, actor.principal_id, new_hash, token_hash)

    await browser_write(rt, creds, fn)


@router.post("/api/v1/auth/logout", tags=["access"])
async def logout(request: Request) -> Response:
    rt = runtime_of(request)
    await sign_out(rt, presented(request))
    resp = Response(
        _dumps(envelope({"signed_out": True}, new_id(), rt.executor.clock())), media_type=JSON
    )
    resp.delete_cookie(
        cookie_name(rt.settings.https),
        path="/",
        secure=rt.settings.https,
        httponly=True,
        samesite="strict",
    )
    return resp


@router.post("/api/v1/me/password", tags=["access"])
async def me_password(request: Request, body: PasswordIn) -> Response:
    rt = runtime_of(request)
    creds, client = presented(request), client_of(rt, request)
    await change_password(rt, creds, body.current_password, body.new_password, client)
    data = {"password_changed": True, "other_sessions_ended": True}
    return Response(_dumps(envelope(data, new_id(), rt.executor.clock())), media_type=JSON)


@router.get("/api/v1/me", tags=["access"])
async def me(request: Request) -> Response:
    def fn(tx: Tx, actor: Actor) -> JsonObject:
        data: JsonObject = {
            "actor": {
                "id": actor.principal_id,
                "name": actor.name,
                "kind": actor.kind,
                "role": actor.role,
                "credential_class": actor.credential_class,
                "access": actor.access,
                "session_id": actor.session_id,
            },
            # Admins reach every project; everyone else the projects granted to them.
            "all_projects": actor.has_every_project,
            "projects": []
            if actor.has_every_project
            else [
                {"project_id": g.project_id, "role": g.role}
                for g in grants.grants_of(tx.conn, actor.principal_id)
            ],
        }
        cookie = browser_cookie(request.cookies, runtime_of(request).settings.https)
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
            raise not_found("session", session_id)  # an agent sees only its own session
        view = accounts.session_view(tx.conn, session_id, tx.now)
        if actor.is_human and not actor.has_every_project:
            seen = {p.id for p in visible_projects(tx.conn, actor)}
            view["held_attempts"] = [a for a in view["held_attempts"] if a["project_id"] in seen]
        return view

    return await read(request, fn)


@router.post("/api/v1/sessions/{session_id}/close", tags=["sessions"])
async def close_session(request: Request, session_id: str) -> Response:
    return await mutate(request, None, lambda op, _b: accounts.close_session(op, session_id))


@router.post("/api/v1/admin/credentials/{credential_id}/rotate", tags=["access"], status_code=201)
async def admin_rotate(request: Request, credential_id: str) -> Response:
    return await mutate(request, None, lambda op, _b: accounts.rotate_credential(op, credential_id))


@router.post("/api/v1/admin/principals/{principal_id}/disable", tags=["access"])
async def admin_disable(request: Request, principal_id: str) -> Response:
    return await mutate(request, None, lambda op, _b: accounts.set_disabled(op, principal_id, True))


@router.post("/api/v1/admin/principals/{principal_id}/enable", tags=["access"])
async def admin_enable(request: Request, principal_id: str) -> Response:
    return await mutate(
        request, None, lambda op, _b: accounts.set_disabled(op, principal_id, False)
    )


@router.get("/api/v1/admin/principals/{principal_id}/projects", tags=["access"])
async def admin_grants(request: Request, principal_id: str) -> Response:
    def fn(tx: Tx, actor: Actor) -> JsonObject:
        require_admin(actor, "read grants")
        return project_grants.grants_view(tx.conn, principal_id)

    return await read(request, fn)


@router.post("/api/v1/admin/principals/{principal_id}/projects", tags=["access"], status_code=201)
async def admin_grant(request: Request, principal_id: str, body: GrantIn) -> Response:
    return await mutate(
        request, body, lambda op, b: project_grants.grant_project(op, principal_id, b)
    )


@router.post(
    "/api/v1/admin/principals/{principal_id}/projects/{project_id}/revoke", tags=["access"]
)
async def admin_revoke_grant(request: Request, principal_id: str, project_id: str) -> Response:
    return await mutate(
        request, None, lambda op, _b: project_grants.revoke_project(op, principal_id, project_id)
    )


@router.post("/api/v1/admin/people", tags=["access"], status_code=201)
async def admin_people(request: Request, body: NewPersonIn) -> Response:
    if body.role == PrincipalRole.AGENT:
        raise CoordinatorError("invalid_input", "role: admin or operator", status=422)
    rt, route = runtime_of(request), operation_of(request)
    await authorized(rt, presented(request), route, lambda a: require_admin(a, "add people"))
    password_hash = await run_in_threadpool(hash_password, body.password)
    person = PersonIn(name=body.name, role=body.role)
    return await mutate(
        request, person, lambda op, b: accounts.add_person(op, b.name, b.role, password_hash)
    )


@router.get("/api/v1/browser-sessions", tags=["access"])
async def list_browser_sessions(request: Request) -> Response:
    cookie = presented(request).cookie
    current = verifier(cookie) if cookie else None
    return await read(
        request, lambda tx, actor: accounts.browser_sessions(tx.conn, tx.now, actor, current)
    )


@router.post("/api/v1/browser-sessions/{session_id}/end", tags=["access"])
async def end_chosen_session(request: Request, session_id: str) -> Response:
    return await mutate(request, None, lambda op, _b: accounts.end_browser_session(op, session_id))
