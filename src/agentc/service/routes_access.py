"""Public, sign-in, admin and session routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agentc import __version__
from agentc.core.addresses import is_loopback_host
from agentc.core.browser import cookie_name
from agentc.core.errors import CoordinatorError
from agentc.core.model import PrincipalKind, PrincipalRole
from agentc.core.wire import Body, ByValue, text
from agentc.service.api import JSON, _dumps, envelope, mutate, presented, read, runtime_of
from agentc.service.auth import (
    BROWSER_SESSION_MS,
    Actor,
    Presented,
    authenticate,
    browser_cookie,
    csrf_token,
    hash_password,
    new_secret,
    require_admin,
    verifier,
    verify_password,
    visible_projects,
)
from agentc.service.ops import JsonObject, Runtime, new_id
from agentc.service.request import ApiRoute
from agentc.service.schemas import AgentIn, GrantIn, LoginIn, Name, SessionIn
from agentc.service.work import accounts
from agentc.service.work import grants as project_grants
from agentc.service.work.refusals import not_found
from agentc.store import grants
from agentc.store.accounts import BrowserSession, Principal, end_browser_session, principal_by_name
from agentc.store.sql import fetch_row, insert
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


def client_address(request: Request, trusted_header: str | None) -> str:
    """The address sign-in throttling counts: the peer, or, when a trusted proxy header is
    configured and the peer is the loopback proxy, the last address that proxy appended."""
    peer = request.client.host if request.client else "unknown"
    if trusted_header and is_loopback_host(peer):
        value = request.headers.get(trusted_header, "")
        forwarded = value.rsplit(",", 1)[-1].strip()
        if forwarded:
            return forwarded[:64]
    return peer


async def sign_in(
    rt: Runtime, username: str, password: str, address: str
) -> tuple[str, JsonObject, int]:
    """Check the password (throttled per address and per name on that address) and open a
    browser session. Returns the cookie, the actor and the time."""
    limiter = rt.limiter

    def look(tx: Tx) -> Principal | None:
        limiter.check(tx.conn, username, address, tx.now)  # the failures every process counts
        return principal_by_name(tx.conn, username)

    row = await run_in_threadpool(rt.executor.read, look)
    if row is not None and row.kind != PrincipalKind.HUMAN:
        row = None  # agents do not sign in
    ok = await run_in_threadpool(verify_password, row.password_hash if row else None, password)
    if not ok or row is None or row.disabled_at is not None:
        await rt.executor.write_async(lambda tx: limiter.failed(tx.conn, username, address, tx.now))
        raise CoordinatorError("authentication_required", "wrong username or password", status=401)
    cookie = new_secret()
    principal_id = row.id

    def work(tx: Tx) -> int:
        limiter.succeeded(tx.conn, username, address)
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

    now = await rt.executor.write_async(work)
    return cookie, {"id": row.id, "name": row.name, "role": row.role}, now


def set_session_cookie(rt: Runtime, resp: Response, cookie: str) -> None:
    resp.set_cookie(
        cookie_name(rt.settings.https),
        cookie,
        max_age=BROWSER_SESSION_MS // 1000,
        path="/",
        httponly=True,
        samesite="strict",
        secure=rt.settings.https,
    )


def check_origin(rt: Runtime, request: Request, what: str) -> None:
    if request.headers.get("origin") != rt.settings.public_origin:
        raise CoordinatorError(
            "operation_not_permitted",
            f"{what} must come from the configured public origin",
            status=403,
        )


@router.post("/api/v1/auth/login", tags=["access"])
async def login(request: Request, body: LoginIn) -> Response:
    rt = runtime_of(request)
    check_origin(rt, request, "sign-in")
    cookie, actor, now = await sign_in(
        rt, body.username, body.password, client_address(request, rt.settings.trusted_proxy_header)
    )
    data = {"actor": actor, "csrf_token": csrf_token(cookie)}
    resp = Response(_dumps(envelope(data, new_id(), now)), media_type=JSON)
    set_session_cookie(rt, resp, cookie)
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


async def change_password(rt: Runtime, creds: Presented, current: str, new: str) -> None:
    """Check the current password, store the new one, end the person's other sessions."""
    new_hash = await run_in_threadpool(hash_password, new)
    origin = rt.settings.public_origin

    def who(tx: Tx) -> str | None:
        actor = authenticate(tx.conn, creds, tx.now, write=True, public_origin=origin)
        row = fetch_row(tx.conn, Principal, actor.principal_id)
        return row.password_hash if row else None

    stored = await run_in_threadpool(rt.executor.read, who)
    if not await run_in_threadpool(verify_password, stored, current):
        raise CoordinatorError(
            "authentication_required",
            "the current password is wrong",
            status=401,
            details={"field": "current_password"},
        )

    def fn(tx: Tx, actor: Actor, token_hash: str) -> None:
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
    await change_password(rt, presented(request), body.current_password, body.new_password)
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
