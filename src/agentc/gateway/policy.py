"""The model policy at the gateway: a call's model and output limit checked before forwarding.

The rule itself is :mod:`agentc.core.model_policy`; this module reads what a call asks for
from its body. Only the top level of the JSON body is read (:func:`top_level`): its keys one by
one, each value with the C scanner, so a body with a key twice (``{"model": "allowed", "model":
"other"}``, which parsers resolve differently) is refused rather than checked as one thing and
read by the provider as another. A request that names no output limit while the policy sets
one gets the policy's limit added as the body's first key (:func:`with_limit`, a splice of
bytes; nothing else of the body changes), so the provider never produces more than the policy
allows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agentc.core.model_policy import ModelPolicy, model_refusal, output_refusal
from agentc.gateway.meter import Api

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_constant=lambda name: _constant(name))


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def output_field(api: Api) -> str:
    return "max_tokens" if api == "anthropic" else "max_output_tokens"


def top_level(body: bytes) -> dict[str, Any]:
    """The body's top-level members; ValueError unless it is one JSON object, keys once each."""
    text = body.decode("utf-8")
    i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[i : i + 1] != "{":
        raise ValueError("the request body is not a JSON object")
    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    members: dict[str, Any] = {}
    if text[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if text[i : i + 1] != '"':
                raise ValueError("the request body is not a JSON object")
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            if key in members:
                raise ValueError(f"the request body has the key {key[:100]!r} twice")
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if text[i : i + 1] != ":":
                raise ValueError("the request body is not a JSON object")
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            members[key], i = _DECODER.raw_decode(text, i)
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if text[i : i + 1] == "}":
                i += 1
                break
            if text[i : i + 1] != ",":
                raise ValueError("the request body is not a JSON object")
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    if _SPACE.match(text, i).end() != len(text):  # type: ignore[union-attr]
        raise ValueError("the request body has more after its JSON object")
    return members


def with_limit(body: bytes, field: str, limit: int) -> bytes:
    """``body`` (a JSON object without ``field``) with ``"field": limit`` as its first member."""
    start = body.index(b"{") + 1
    rest = body[start:]
    member = json.dumps({field: limit})[1:-1].encode()
    separator = b"" if rest.strip() == b"}" else b","
    return body[:start] + member + separator + rest


@dataclass(frozen=True)
class Refusal:
    """A call outside the policy: which rule (``model``, ``max_output_tokens``, ``body``), why."""

    rule: str
    message: str


@dataclass(frozen=True)
class Checked:
    """What the call asks for, and the body to forward (the policy's limit added if need be)."""

    model: str | None
    body: bytes


def read_members(body: bytes) -> dict[str, Any] | str:
    """The body's top-level members (:func:`top_level`), or why they cannot be read."""
    try:
        return top_level(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        plain = type(exc) is ValueError  # ours; a decoder's names bytes, not the problem
        return str(exc) if plain else "the request body is not JSON"


def check_body(
    policy: ModelPolicy, api: Api, body: bytes, members: dict[str, Any] | str
) -> Checked | Refusal:
    """Check a metered call's body (its ``members``, or why they cannot be read) against
    ``policy`` (one that reads bodies)."""
    if isinstance(members, str):
        return Refusal("body", f"{members} (the model policy reads its model and output limit)")
    model = members.get("model")
    refused = model_refusal(policy, model)
    if refused is not None:
        return Refusal("model", refused)
    field = output_field(api)
    refused = output_refusal(policy, field, members.get(field))
    if refused is not None:
        return Refusal("max_output_tokens", refused)
    if policy.max_output_tokens is not None and members.get(field) is None:
        if field in members:  # an explicit null: the provider's default, unbounded here
            return Refusal("max_output_tokens", f"{field}: null, and the model policy sets one")
        body = with_limit(body, field, policy.max_output_tokens)
    return Checked(model if isinstance(model, str) else None, body)
