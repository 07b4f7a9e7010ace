"""The application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentc import __version__
from agentc.core.body import BodyTooLarge, read_body
from agentc.core.browser import cookie_name
from agentc.core.errors import CoordinatorError
from agentc.service import console, routes_access, routes_work
from agentc.service.api import error_response, install_error_handlers
from agentc.service.console.render import html
from agentc.service.hosts import Hosts, Under
from agentc.service.lane import LeaseLane
from agentc.service.ops import Runtime
from agentc.service.request import replayed
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


def _console_path(path: str) -> bool:
    """A path of the console's pages and forms (its static files are public)."""
    return (path in ("/", "/console") or path.startswith("/console/")) and not path.startswith(
        "/console/static/"
    )


def misdirected(message: str) -> CoordinatorError:
    return CoordinatorError("misdirected_request", message, status=421)


class Guard:
    """Before routing: refuse a request under a name that is not the service's (browser
    sessions only under the console's own, `agentc.service.hosts`), refuse oversized bodies,
    answer 401 to private paths without any credential (authentication before existence), and
    add the security headers."""

    def __init__(self, app: ASGIApp, limit: int, hosts: Hosts, https: bool) -> None:
        self.app = app
        self.limit = limit
        self.hosts = hosts
        self.cookie = cookie_name(https)
        self.headers = SECURITY_HEADERS + (
            [(b"strict-transport-security", b"max-age=31536000")] if https else []
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        under = self.hosts.under(headers.get(b"host"))
        if under is not Under.CONSOLE and await self._elsewhere(under, scope, receive, send):
            return
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

        await self.app(scope, receive, self._with_headers(send))

    async def _elsewhere(self, under: Under, scope: Scope, receive: Receive, send: Send) -> bool:
        """Answer a request made under a name that is not the console's when it is refused
        (True): a console page or form (the page that says where the console is, naming no
        address), a sign-in, a browser session, or anything under a name that is not
        loopback's. The console's name itself is never given here."""
        path: str = scope["path"]
        if _console_path(path):
            page = html("elsewhere.html", http_status=421)
            await page(scope, receive, self._with_headers(send))
            return True
        refusal = None
        if under is Under.FOREIGN:
            refusal = misdirected(
                "this service does not answer under this name: browsers reach the console at "
                "its public origin, programs the API on loopback"
            )
        elif path == "/api/v1/auth/login":
            refusal = misdirected(
                "sign in at the console's own address (the public origin), never here: a "
                "session cookie set here would reach every server on this host"
            )
        elif self._has_session_cookie(scope):
            from agentc.service.auth import unauthenticated

            refusal = unauthenticated(
                "a browser session is good only at the console's own address (the public origin)"
            )
        if refusal is None:
            return False
        await self._reject(scope, receive, send, refusal)
        return True

    def _has_session_cookie(self, scope: Scope) -> bool:
        return any(
            name == b"cookie" and self.cookie in cookie_parser(value.decode("latin-1"))
            for name, value in scope["headers"]
        )

    def _with_headers(self, send: Send) -> Send:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + self.headers
            await send(message)

        return send_with_headers

    def _too_large(self) -> CoordinatorError:
        return CoordinatorError(
            "payload_too_large", f"the request body is larger than {self.limit} bytes", status=413
        )

    async def _reject(
        self, scope: Scope, receive: Receive, send: Send, err: CoordinatorError
    ) -> None:
        await error_response(err)(scope, receive, self._with_headers(send))


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
    app.add_middleware(
        Guard, limit=settings.json_body_limit_bytes, hosts=runtime.hosts, https=settings.https
    )
    return app
