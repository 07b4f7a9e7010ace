"""How a route reads its request before the operation runs: the ids in its path and its JSON body.

Every API and console route is an `ApiRoute`. A path parameter named `*_id` must be an id
(`agentc.core.rules.check_path_id`: 400 naming the parameter), and a JSON body is parsed strictly:
UTF-8, standard JSON only (no `NaN`, `Infinity`, or a number too large for a double), at most
`JSON_DEPTH_MAX` arrays and objects deep, and text that is valid Unicode (no unpaired surrogate
escape). A body that breaks one of these is 400 `invalid_request` naming the problem, like
malformed JSON; field types and ranges are the body models' (`agentc.service.schemas`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive

from agentc.core.errors import AgentcError
from agentc.core.model import JSON_DEPTH_MAX
from agentc.core.rules import check_path_id

# A \uXXXX escape of a surrogate: only then can the parsed text hold an unpaired one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


class BodyRefused(AgentcError, ValueError):
    """A body that parses as Python's JSON but is not standard JSON the service accepts."""


def _constant(name: str) -> NoReturn:
    raise BodyRefused(f"{name} is not a JSON number (numbers must be finite)")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise BodyRefused(f"{literal} is out of range for a JSON number")
    return value


def _shape_problem(value: Any, surrogates: bool) -> str | None:
    """What json.loads lets through that the service refuses: nesting deeper than
    JSON_DEPTH_MAX, or (when `surrogates`) text holding an unpaired surrogate."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth >= JSON_DEPTH_MAX:
                return f"nested deeper than {JSON_DEPTH_MAX} arrays and objects"
            children = [*node, *node.values()] if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
        elif surrogates and isinstance(node, str) and not node.isascii():
            try:
                node.encode()
            except UnicodeEncodeError:
                return "text holds an unpaired surrogate (\\ud800-\\udfff): not valid Unicode"
    return None


def parse_json(body: bytes) -> Any:
    """The JSON document body holds, or json.JSONDecodeError saying what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError("not UTF-8 text", "", exc.start) from None
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise json.JSONDecodeError(f"malformed JSON: {exc.msg} ({where})", "", exc.pos) from None
    except (ValueError, RecursionError) as exc:  # BodyRefused, an integer of 4300+ digits, ...
        raise json.JSONDecodeError(str(exc) or type(exc).__name__, "", 0) from None
    structural = body.count(b"[") + body.count(b"{")
    deep = structural > JSON_DEPTH_MAX
    surrogates = _SURROGATE_ESCAPE.search(body) is not None
    if deep or surrogates:
        problem = _shape_problem(value, surrogates)
        if problem:
            raise json.JSONDecodeError(problem, "", 0)
    return value


class StrictJsonRequest(Request):
    """A request whose JSON body is read by `parse_json`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class ApiRoute(APIRoute):
    """A route whose path ids are checked and whose JSON body is parsed strictly."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            for name, value in request.path_params.items():
                if name.endswith("_id"):
                    check_path_id(name, value)
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return checked


def replayed(body: bytes, receive: Receive) -> Receive:
    """A receive that gives body as one message, then whatever receive gives (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
