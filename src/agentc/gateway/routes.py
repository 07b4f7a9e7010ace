"""What the gateway forwards: per API, exactly the calls the harnesses make (docs/gateway.md).

Anything else (batches, files, chat completions, admin paths, a dot segment, a trailing slash,
another method) is refused before it reaches the provider: the real credential opens the whole
organization's account, a launch may use it only for these. Matched against the decoded path
exactly; the path forwarded is the one matched, so no normalization upstream can turn an
allowed path into another.

Only the model calls cost money and are metered; ``count_tokens`` and the model list are free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentc.gateway.meter import Api

# A model id as a single path segment: starts with a letter or digit, so never "." or "..".
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
_MODELS_ONE = "/v1/models/"


@dataclass(frozen=True)
class Route:
    metered: bool


_METERED = Route(metered=True)
_FREE = Route(metered=False)

ALLOWED: dict[Api, dict[tuple[str, str], Route]] = {
    # Claude Code and Pi: Messages (streamed), token counting, the model list.
    "anthropic": {
        ("POST", "/v1/messages"): _METERED,
        ("POST", "/v1/messages/count_tokens"): _FREE,
        ("GET", "/v1/models"): _FREE,
    },
    # Codex: Responses (streamed), the model list.
    "openai": {
        ("POST", "/v1/responses"): _METERED,
        ("GET", "/v1/models"): _FREE,
    },
}


def route_for(api: Api, method: str, path: str) -> Route | None:
    """The route of an allowed call, or None when the gateway must refuse it."""
    route = ALLOWED[api].get((method, path))
    if route is not None:
        return route
    one = path.startswith(_MODELS_ONE) and _MODEL_ID.fullmatch(path[len(_MODELS_ONE) :])
    return _FREE if method == "GET" and one else None


def allowed_calls(api: Api) -> list[str]:
    """``METHOD path`` of every allowed call (docs and refusal messages)."""
    calls = [f"{method} {path}" for method, path in ALLOWED[api]]
    return [*calls, f"GET {_MODELS_ONE}{{model_id}}"]
