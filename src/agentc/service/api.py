"""The request pipeline: envelope, errors, authentication, idempotent mutations.

This is the one place that builds an API error response and the one place that runs a
mutation: authenticate under the write lock, replay or refuse a used Idempotency-Key, refuse a
non-human caller's secrets (:mod:`agentc.service.screening`), run the operation, write its
receipt (and the operation's audit events) in the same transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import cookie_parser
from starlette.responses import Response
from starlette.types import Scope

from agentc.core.errors import CoordinatorError
from agentc.core.model import RECEIPT_RETENTION_MS
from agentc.core.rules import check_idempotency_key, fingerprint, rfc3339
from agentc.service import screening
from agentc.service.auth import (
    Actor,
    Presented,
    authenticate,
    authenticate_mutation,
    browser_cookie,
)
from agentc.service.ops import JsonObject, Op, Result, Runtime, new_id
from agentc.store.audit import Receipt
from agentc.store.sql import insert
from agentc.store.tx import Tx, wall_clock_ms

log = logging.getLogger("agentc.service")

JSON = "application/json"

B = TypeVar("B", bound=BaseModel | None)


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # built once


def _dumps(value: object) -> bytes:
    return _ENCODER.encode(value).encode()


def envelope(data: JsonObject, request_id: str, now: int) -> JsonObject:
    return {"data": data, "request_id": request_id, "server_time": rfc3339(now)}


def error_response(
    err: CoordinatorError, request_id: str | None = None, now: int | None = None
) -> Response:
    body = {
        "request_id": request_id or new_id(),
        "server_time": rfc3339(now if now is not None else wall_clock_ms()),
        "error": {
            "code": err.code,
            "message": err.message,
            "details": err.details,
            "retryable": err.retryable,
        },
    }
    headers = {"Retry-After": "60"} if err.status == 429 else None
    return Response(_dumps(body), status_code=err.status, media_type=JSON, headers=headers)


# The request headers the caller's credentials travel in (ASGI names them in lower case), and
# those of them a request may carry only once.
_CREDENTIAL_HEADERS = frozenset(
    (
        b"authorization",
        b"cookie",
        b"x-coordinator-session",
        b"x-coordinator-session-proof",
        b"origin",
        b"x-csrf-token",
    )
)
_ONCE = (b"authorization", b"x-coordinator-session", b"x-coordinator-session-proof")


def presented(request: Request) -> Presented:
    """The credentials the request presents, read in one pass over its raw headers (values
    decoded as Starlette does, the first of a repeated header used; cookies from every
    `Cookie` header, as `Request.cookies` reads them)."""
    found: dict[bytes, list[str]] = {}
    for name, value in request.scope["headers"]:
        if name in _CREDENTIAL_HEADERS:
            found.setdefault(name, []).append(value.decode("latin-1"))
    bearer = None
    auth_values = found.get(b"authorization")
    if auth_values:
        scheme, _, token = auth_values[0].partition(" ")
        bearer = token.strip() if scheme.lower() == "bearer" else ""
    cookies: dict[str, str] = {}
    for header in found.get(b"cookie", ()):
        cookies.update(cookie_parser(header))

    def first(name: bytes) -> str | None:
        values = found.get(name)
        return values[0] if values else None

    return Presented(
        bearer=bearer if bearer is None else (bearer or "-"),
        cookie=browser_cookie(cookies, runtime_of(request).settings.https),
        session_id=first(b"x-coordinator-session"),
        proof=first(b"x-coordinator-session-proof"),
        origin=first(b"origin"),
        csrf=first(b"x-csrf-token"),
        duplicated=any(len(found.get(name, ())) > 1 for name in _ONCE),
    )


def url_path(scope: Scope) -> str:
    """The request's path exactly as ``request.url.path`` gives it, without building the whole
    URL: Starlette escapes these three characters."""
    path: str = scope["path"]
    return path.replace("?", "%3F").replace("#", "%23").replace("\\", "%5C")


def operation_of(request: Request) -> str:
    """The operation a mutation's receipt is kept under: its method and path."""
    return f"{request.method} {url_path(request.scope)}"


def project_of(request: Request) -> str | None:
    """The project the route names (its `{project_id}` path parameter), which the caller must
    be granted: every route about one project names it there."""
    value = request.path_params.get("project_id")
    return value if isinstance(value, str) else None


def runtime_of(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def reader(request: Request) -> Callable[[Tx], Actor]:
    """Who makes ``request``, for a read (its credentials, route and project taken now, checked
    in the transaction the returned function is called in)."""
    creds, route = presented(request), operation_of(request)
    origin, project_id = runtime_of(request).settings.public_origin, project_of(request)

    def actor(tx: Tx) -> Actor:
        return authenticate(
            tx.conn,
            creds,
            tx.now,
            write=False,
            public_origin=origin,
            project_id=project_id,
            route=route,
        )

    return actor


async def read(request: Request, fn: Callable[[Tx, Actor], JsonObject]) -> Response:
    """An authenticated read: the data in the envelope."""
    rt = runtime_of(request)
    who = reader(request)

    def work(tx: Tx) -> bytes:
        return _dumps(envelope(fn(tx, who(tx)), new_id(), tx.now))

    body = await run_in_threadpool(rt.executor.read, work)
    return Response(body, media_type=JSON)


async def authorized(
    rt: Runtime, creds: Presented, route: str, check: Callable[[Actor], None]
) -> None:
    """Who asks, checked (as a write) before costly work runs for them: a route that hashes a
    password hashes it only after this, so an outsider's request costs no Argon2 hash. The
    mutation authenticates again under the write lock."""
    origin = rt.settings.public_origin

    def work(tx: Tx) -> None:
        check(authenticate(tx.conn, creds, tx.now, write=True, public_origin=origin, route=route))

    await run_in_threadpool(rt.executor.read, work)


def mutation(
    rt: Runtime,
    creds: Presented,
    operation: str,
    key: str,
    body: B,
    fn: Callable[[Op, B], Result],
    *,
    lone_proof: bool = False,
    project_id: str | None = None,
) -> Callable[[Tx], tuple[int, bytes, bool]]:
    """The transaction of one idempotent mutation: authenticate under the write lock (the
    caller's current access, and its grant of project_id), replay or refuse a used key, refuse
    what a non-human caller sends carrying a secret (scanned here, looked up in the
    transaction), run the operation, store its receipt. Returns (status, body, replayed)."""
    payload = body.model_dump(mode="json") if body is not None else None
    own = screening.presented_secrets(creds.bearer, creds.proof)
    screened = screening.screen(payload, key, own)
    fp = fingerprint(operation, payload, creds.session_id, creds.proof)
    request_id = new_id()
    origin = rt.settings.public_origin
    closing = operation.endswith("/close")

    def work(tx: Tx) -> tuple[int, bytes, bool]:
        # Requests with one key run one after the other: a second waits for the first's
        # receipt and replays it, instead of running too and racing it to the receipt (where
        # the quickest answer, perhaps a worse one, would win: two queue claims at once).
        tx.serialize(f"receipt {operation} {key}")
        actor, prior = authenticate_mutation(
            tx.conn,
            creds,
            tx.now,
            public_origin=origin,
            lone_proof=lone_proof,
            project_id=project_id,
            operation=operation,
            key=key,
        )
        if actor.session_closed and not closing:
            raise CoordinatorError("session_closed", "the agent session is closed", status=403)
        if prior is not None:
            return _replay(prior, fp, tx.now, actor.credential_id)
        if not actor.is_human:
            screening.enforce(tx.conn, screened, tx.now)
        client_proof = creds.proof if lone_proof and creds.session_id is None else None
        result = fn(Op(tx, actor, rt, client_proof), body)
        answer = _dumps(envelope(result.data, request_id, tx.now))
        stored = answer  # what a replay answers: the same, unless it held a secret
        if result.secret_fields:
            data = {k: v for k, v in result.data.items() if k not in result.secret_fields}
            stored = _dumps(envelope({**data, "secret_unavailable": True}, request_id, tx.now))
        # No savepoint: should a request with the same key still race this one (it cannot,
        # see above), it fails on the receipt's primary key, the whole transaction rolls back,
        # and `mutate` retries it, finding the receipt.
        # Deferred: on PostgreSQL it goes to the server with the COMMIT (one round trip).
        insert(
            tx.conn,
            Receipt(
                principal_id=actor.principal_id,
                operation=operation,
                key=key,
                fingerprint=fp,
                status=result.status,
                body=stored.decode(),
                created_at=tx.now,
                credential_id=actor.credential_id,
                authority_epoch=actor.epoch,
            ),
            deferred=True,
        )
        return result.status, answer, False

    return work


async def mutate(
    request: Request,
    body: B,
    fn: Callable[[Op, B], Result],
    *,
    lone_proof: bool = False,
) -> Response:
    """Run one idempotent mutation in one transaction and answer with its envelope."""
    rt = runtime_of(request)
    key = check_idempotency_key(request.headers.get("idempotency-key"))
    work = mutation(
        rt,
        presented(request),
        operation_of(request),
        key,
        body,
        fn,
        lone_proof=lone_proof,
        project_id=project_of(request),
    )
    for _ in range(3):
        try:
            status, out, replayed = await rt.executor.write_async(work)
            break
        except IntegrityError:
            # Two requests with one key raced on PostgreSQL: the loser now finds the receipt.
            continue
    else:
        raise CoordinatorError("temporarily_unavailable", "retry", status=503, retryable=True)
    headers = {"Idempotency-Replayed": "true"} if replayed else None
    return Response(out, status_code=status, media_type=JSON, headers=headers)


def _replay(
    prior: Receipt, fp: str, now: int, credential_id: str | None
) -> tuple[int, bytes, bool]:
    """The stored answer, for the caller whose access was just checked: the same request
    (fingerprint) from the same agent credential that made it (another credential of the
    principal, say a read-only or an integrator one, may not replay it)."""
    if prior.credential_id is not None and prior.credential_id != credential_id:
        raise CoordinatorError(
            "idempotency_conflict",
            "this Idempotency-Key was used by another credential of this agent; use a new key",
            status=409,
        )
    if prior.fingerprint != fp:
        raise CoordinatorError(
            "idempotency_conflict",
            "this Idempotency-Key was already used with a different request; use a new key "
            "for a new request",
            status=409,
        )
    if prior.body is None or now - prior.created_at > RECEIPT_RETENTION_MS:
        raise CoordinatorError(
            "idempotency_receipt_expired",
            "this Idempotency-Key's receipt is older than 30 days; use a new key",
            status=409,
        )
    return prior.status, prior.body.encode(), True


def install_error_handlers(app: FastAPI) -> None:
    def now(request: Request) -> int:
        return runtime_of(request).executor.clock()

    # Starlette types every handler as taking an Exception; each is registered for its class.
    async def _coordinator(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, CoordinatorError)
        return error_response(exc, now=now(request))

    async def _validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        hidden = await hidden_project(request)
        return error_response(hidden or validation_error(exc), now=now(request))

    async def _http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "record_not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "invalid_request"
        )
        return error_response(
            CoordinatorError(code, str(exc.detail), status=exc.status_code), now=now(request)
        )

    async def _internal(request: Request, exc: Exception) -> Response:
        # A database error's message holds its statement, never its parameters (the engine
        # and agentc.store.sql hide them).
        log.error("internal error: %s", type(exc).__name__, exc_info=exc)
        return error_response(
            CoordinatorError("internal_error", "internal error", status=500), now=now(request)
        )

    app.add_exception_handler(CoordinatorError, _coordinator)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _internal)


async def hidden_project(request: Request) -> CoordinatorError | None:
    """A malformed request to a project route is refused as the route's work would be when
    the caller may not reach the project (401, or 404 as if it did not exist), so the shape
    of a refusal never tells a project's existence. Elsewhere, a bearer token's refusal of the
    request itself (403: an attempt credential outside its attempt's scope) comes first too."""
    project_id = project_of(request)
    rt = runtime_of(request)
    if project_id is None and presented(request).bearer is None:
        return None
    try:
        await run_in_threadpool(rt.executor.read, reader(request))
    except CoordinatorError as err:
        return err if project_id is not None or err.status == 403 else None
    return None


_REQUEST_LINE = ("path", "query", "header", "cookie")
_LOCATIONS = ("body", *_REQUEST_LINE)


def validation_error(exc: RequestValidationError) -> CoordinatorError:
    """A body field's problem is 422 `invalid_input`; a body that is not acceptable JSON or a
    bad path or query parameter is 400 `invalid_request`. The message starts with the field
    (a key that is not a plain name shown as ``*``: an unknown key may be a secret)."""
    problems = []
    status = 422
    for err in exc.errors():
        loc = [screening.shown(str(p)) for p in err.get("loc", ())]
        if loc and loc[0] in _REQUEST_LINE:
            status = 400
        where = ".".join(loc[1:] if loc and loc[0] in _LOCATIONS else loc) or "body"
        if err.get("type") == "json_invalid":
            status = 400
            problem = str(err.get("ctx", {}).get("error") or "malformed JSON")
            problems.append({"field": "body", "problem": problem})
            continue
        if err.get("type") == "extra_forbidden":
            problems.append({"field": where, "problem": "unknown field"})
            continue
        problems.append({"field": where, "problem": str(err.get("msg", "invalid"))})
    first = problems[0] if problems else {"field": "body", "problem": "invalid"}
    code = "invalid_request" if status == 400 else "invalid_input"
    return CoordinatorError(
        code,
        f"{first['field']}: {first['problem']}",
        status=status,
        details={"problems": problems[:20]},
    )
