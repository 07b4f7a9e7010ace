"""The lease lane: the lease operations, most of an agent's traffic, without the framework.

Claims, renewals, checkpoints and releases are most of what the service answers. FastAPI
spends more of the event loop on each of them (two routers' matching, the request/response
wrapper, dependency solving, body validation) than the endpoint does: measured in
docs/benchmarks.md. The lane answers a well-formed lease request itself, with the very
endpoint FastAPI would call, and hands anything else to the application unchanged (the body it
read replayed), so every refusal keeps the one shape and the one home it has there:

- the route table is the project router's own: :func:`lane_route` is called next to the
  route's declaration, with its path, body model and endpoint;
- a request is the lane's only if its path ids pass :func:`check_path_id`, its body is JSON
  (``application/json``) that `parse_json` accepts and the body model validates; otherwise
  the application answers it (a 400, 404 or 422 exactly as without the lane);
- the endpoint's own refusals (:class:`CoordinatorError`: a lapsed lease, a conflict) get
  `error_response`, as the application's handler gives them; anything else propagates to the
  server-error handler, as it would from a route.

It sits inside `Guard`, so the body limit, the missing-credential 401 and the security headers
apply to it as to every route.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from agentc.core.body import read_body
from agentc.core.errors import CoordinatorError
from agentc.core.rules import check_path_id
from agentc.service.api import error_response, runtime_of
from agentc.service.request import parse_json, replayed

Endpoint = Callable[..., Awaitable[Response]]


class LaneRoute(NamedTuple):
    method: str
    path: re.Pattern[str]
    model: type[BaseModel]
    endpoint: Endpoint  # called as endpoint(request, body=..., **path_params)


def lane_route(method: str, template: str, model: type[BaseModel], endpoint: Endpoint) -> LaneRoute:
    """The lane's entry for a route declared as ``template`` (``{name}`` path parameters
    match what Starlette's do: one non-empty segment)."""
    parts = re.split(r"\{(\w+)\}", template)  # literal, name, literal, name, ...
    pattern = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts)
    )
    return LaneRoute(method, re.compile(pattern + r"\Z"), model, endpoint)


class LeaseLane:
    """ASGI middleware answering the lane's routes (see the module's docstring)."""

    def __init__(self, app: ASGIApp, routes: list[LaneRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._match(scope) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        route, params = found
        body = await read_body(receive)
        if body is None:
            return  # the client left before its body ended: nobody to answer
        receive = replayed(body, receive)
        model = _valid(route, params, scope, body)
        if model is None:
            await self.app(scope, receive, send)
            return
        scope["path_params"] = params
        request = Request(scope, receive)
        try:
            response = await route.endpoint(request, body=model, **params)
        except CoordinatorError as err:
            response = error_response(err, now=runtime_of(request).executor.clock())
        await response(scope, receive, send)

    def _match(self, scope: Scope) -> tuple[LaneRoute, dict[str, str]] | None:
        method, path = scope["method"], scope["path"]
        for route in self.routes:
            if route.method == method:
                matched = route.path.match(path)
                if matched is not None:
                    return route, matched.groupdict()
        return None


def _valid(route: LaneRoute, params: dict[str, str], scope: Scope, body: bytes) -> Any:
    """The body as the route's model, or None when the application should answer."""
    content_type = b""
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = value
            break
    if content_type.partition(b";")[0].strip().lower() != b"application/json":
        return None
    try:
        for name, value in params.items():
            if name.endswith("_id"):
                check_path_id(name, value)
        return route.model.model_validate(parse_json(body))
    except (CoordinatorError, ValueError, ValidationError):  # JSONDecodeError is a ValueError
        return None
