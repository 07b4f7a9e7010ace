"""The application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentc import __version__
from agentc.core.errors import CoordinatorError
from agentc.service import console, routes_access, routes_work
from agentc.service.api import error_response, install_error_handlers
from agentc.service.lane import LeaseLane
from agentc.service.ops import Runtime
from agentc.service.request import BodyTooLarge, read_body, replayed
from agentc.service.settings import POOL_OVERFLOW, ServerSettings
from agentc.store.engine import Database, open_engine
from agentc.store.tx import Clock, Executor, wall_clock_ms

PUBLIC_PATHS = frozenset(
    {
        "/healthz",
        "/api/v1/info",
        "/api/v1/help/authentication",
        "/api/v1/openapi.json",
        "/api/v1/auth/login",
    }
)

SECURITY_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with a
    # form post, and the console's writes are checked against the public origin.
    (b"referrer-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
]


class Guard:
    """Before routing: refuse oversized bodies, answer 401 to private paths without any
    credential (authentication before existence), and add the security headers."""

    def __init__(self, app: ASGIApp, limit: int, https: bool) -> None:
        self.app = app
        self.limit = limit
        self.headers = SECURITY_HEADERS + (
            [(b"strict-transport-security", b"max-age=31536000")] if https else []
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._reject(scope, receive, send, self._too_large())
            return
        path: str = scope["path"]
        if (
            path.startswith("/api/")
            and path not in PUBLIC_PATHS
            and not (b"authorization" in headers or b"cookie" in headers)
        ):
            from agentc.service.auth import unauthenticated

            await self._reject(scope, receive, send, unauthenticated())
            return
        if b"transfer-encoding" in headers:
            # A body of undeclared length (chunked) is read here, up to the limit, so one
            # larger than the limit gets the same 413 as a declared one.
            try:
                body = await read_body(receive, self.limit)
            except BodyTooLarge:
                await self._reject(scope, receive, send, self._too_large())
                return
            if body is None:
                return  # the client left: nobody to answer, and a partial body is no request
            receive = replayed(body, receive)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + self.headers
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _too_large(self) -> CoordinatorError:
        return CoordinatorError(
            "payload_too_large", f"the request body is larger than {self.limit} bytes", status=413
        )

    async def _reject(
        self, scope: Scope, receive: Receive, send: Send, err: CoordinatorError
    ) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + self.headers
            await send(message)

        await error_response(err)(scope, receive, send_with_headers)


def create_app(
    settings: ServerSettings, *, clock: Clock = wall_clock_ms, executor: Executor | None = None
) -> FastAPI:
    settings.check_serving()
    own_executor = executor is None
    if executor is None:
        engine = open_engine(
            Database.parse(settings.database),
            create=False,
            pool_size=settings.database_pool_size,
            max_overflow=POOL_OVERFLOW,
        )
        executor = Executor(engine, clock)
    runtime = Runtime(settings, executor)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if own_executor:
            runtime.executor.close()

    app = FastAPI(
        title="agentc coordinator",
        version=__version__,
        openapi_url="/api/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry looks for configured providers on every request; the
        # service exports none (its audit events and host telemetry are its record).
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    # Routes are matched in order, one by one: the project routes (the lease operations, the
    # bulk of the traffic) come first. No path of one router is a path of another.
    app.include_router(routes_work.router)
    app.include_router(routes_access.router)
    app.include_router(console.router)
    app.add_middleware(LeaseLane, routes=routes_work.LANE)  # inside the Guard
    app.add_middleware(Guard, limit=settings.json_body_limit_bytes, https=settings.https)
    return app
