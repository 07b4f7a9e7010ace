"""Pi: its flags, gateway settings and event stream (``--mode json``).

Pointed at the gateway by a provider ``agentc`` (Anthropic Messages API, ``baseUrl`` +
``apiKey``) in ``~/.pi/agent/models.json``, selected with ``--provider agentc --model <id>``.
It has no hook to confine a reviewer's commands, so it never reviews.

Its stream: each assistant ``message_end`` carries its call's usage and a cost that Pi computes
from its own catalog (an estimate); ``agent_end`` closes the run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentc.supervisor.harness.base import Adapter, LaunchRequest
from agentc.supervisor.harness.env import PROVIDER, HarnessSetup, ModelEndpoint, root_url
from agentc.supervisor.harness.stream import (
    FILE_TOOLS,
    State,
    Usage,
    dollars_of,
    limit_text,
    number,
    table,
)

# Pi has no built-in default for a custom provider: it is told which model id to use.
DEFAULT_MODEL = "claude-sonnet-5"


def model_of(endpoint: ModelEndpoint) -> str:
    return endpoint.model or DEFAULT_MODEL


def models_json(endpoint: ModelEndpoint) -> str:
    model: dict[str, Any] = {"id": model_of(endpoint)}
    if endpoint.max_output_tokens is not None:  # it asks 16,384 a call by default
        model["maxTokens"] = endpoint.max_output_tokens
    models = {
        "providers": {
            PROVIDER: {
                "baseUrl": root_url(endpoint.base_url),
                "api": "anthropic-messages",
                "apiKey": endpoint.key,
                "models": [model],
            }
        }
    }
    return json.dumps(models, indent=2) + "\n"


def provider_args(model: str | None) -> tuple[str, ...]:
    """Pi's flags selecting the ``agentc`` provider of models.json and its model."""
    return ("--provider", PROVIDER, "--model", model or DEFAULT_MODEL)


def setup(endpoint: ModelEndpoint, home: Path) -> HarnessSetup:
    files = {home / ".pi/agent/models.json": models_json(endpoint)}
    return HarnessSetup({}, files, provider_args(endpoint.model))


class Pi(Adapter):
    name = "pi"
    quiet_env = {"PI_OFFLINE": "1", "PI_TELEMETRY": "0", "PI_SKIP_VERSION_CHECK": "1"}

    def args(self, request: LaunchRequest) -> tuple[str, ...]:
        model = None if request.model == "default" else request.model
        return ("-p", "--mode", "json", "--no-session", *provider_args(model))

    def model_setup(self, endpoint: ModelEndpoint, *, home: Path, codex_home: Path) -> HarnessSetup:
        return setup(endpoint, home)

    def parse(self, s: State, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "session" and isinstance(event.get("id"), str):
            s.session = event["id"]
        elif kind == "message_end":
            message = table(event.get("message"))
            if message.get("role") != "assistant":
                return
            if isinstance(message.get("model"), str):
                s.model = message["model"]
            usage = table(message.get("usage"))
            s.anonymous = s.anonymous + Usage(
                number(usage.get("input")) + number(usage.get("cacheWrite")),
                number(usage.get("cacheRead")),
                number(usage.get("output")),
            )
            cost = dollars_of(table(usage.get("cost")).get("total"))
            if cost is not None:
                s.own_usd += cost
                s.own_priced = True
            texts = [
                block["text"]
                for block in message.get("content") or []
                if isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ]
            if texts:
                s.final_text = "".join(texts)
                s.step("model", "message", s.final_text)
            if message.get("stopReason") == "error":
                error = message.get("errorMessage")
                s.failed = True
                s.error = error if isinstance(error, str) else "pi reported an error"
                s.step("error", "error", s.error)
                if limit_text(s.error):
                    s.limit(None)
            elif message.get("stopReason") in ("stop", "toolUse", "length"):
                s.failed = False
                s.error = None
        elif kind == "tool_execution_start":
            name = event.get("toolName") if isinstance(event.get("toolName"), str) else "tool"
            args = table(event.get("args"))
            what = next((args[k] for k in ("command", "path", "pattern") if k in args), args)
            s.step(
                "file" if name in FILE_TOOLS else "tool", name, what, ref=event.get("toolCallId")
            )
        elif kind == "tool_execution_end":
            s.ended(event.get("toolCallId"), event.get("isError") is not True)
        elif kind == "agent_end":
            s.completed = event.get("willRetry") is not True
