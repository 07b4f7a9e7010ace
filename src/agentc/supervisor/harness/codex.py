"""Codex: its flags, gateway settings and event stream (``exec --json``).

Pointed at the gateway by a ``model_providers.agentc`` table (``base_url`` = ``<root>/v1``,
``env_key``, Responses wire API) in the launch's own ``$CODEX_HOME/config.toml``, the key in
``OPENAI_API_KEY``. It has no hook to confine a reviewer's commands, so it never reviews.

Its stream: ``turn.completed.usage`` is the thread's running total, so the last one per thread
counts; fresh input = ``input_tokens - cached_input_tokens``; no dollars (priced from the table
when the model is known). ``error``/``turn.failed`` end the run as failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentc.supervisor.harness.base import Adapter, LaunchRequest
from agentc.supervisor.harness.env import PROVIDER, HarnessSetup, ModelEndpoint, root_url
from agentc.supervisor.harness.stream import State, Usage, epoch_reset, limit_text, number, table

if TYPE_CHECKING:
    from agentc.supervisor.launch.rundir import RunLayout

KEY_ENV = "OPENAI_API_KEY"


def config_toml(endpoint: ModelEndpoint, *, retries: int = 0) -> str:
    """``config.toml`` for Codex: the provider table; the key itself stays in the env."""
    lines = [f'model_provider = "{PROVIDER}"']
    if endpoint.model:
        lines.append(f"model = {json.dumps(endpoint.model)}")
    lines += [
        "check_for_update_on_startup = false",
        "",
        f"[model_providers.{PROVIDER}]",
        f'name = "{PROVIDER}"',
        f"base_url = {json.dumps(root_url(endpoint.base_url) + '/v1')}",
        f'env_key = "{KEY_ENV}"',
        'wire_api = "responses"',
        f"request_max_retries = {retries}",
        f"stream_max_retries = {retries}",
    ]
    return "\n".join(lines) + "\n"


def setup(endpoint: ModelEndpoint, codex_home: Path, *, retries: int = 0) -> HarnessSetup:
    env = {"CODEX_HOME": str(codex_home), KEY_ENV: endpoint.key}
    return HarnessSetup(env, {codex_home / "config.toml": config_toml(endpoint, retries=retries)})


class Codex(Adapter):
    name = "codex"

    def args(self, request: LaunchRequest) -> tuple[str, ...]:
        # $CODEX_HOME/config.toml is the launch's own (the gateway provider table).
        args = ["exec", "--json", "--skip-git-repo-check"]
        args += ["-s", "danger-full-access", "-c", "approval_policy=never"]
        args += ["-c", "check_for_update_on_startup=false", "-C", str(request.clone)]
        return (*args, *(["-m", request.model] if request.model != "default" else []), "-")

    def env(self, layout: RunLayout, request: LaunchRequest) -> dict[str, str]:
        return {"CODEX_HOME": str(layout.run / "state/codex-home")}

    def model_setup(self, endpoint: ModelEndpoint, *, home: Path, codex_home: Path) -> HarnessSetup:
        return setup(endpoint, codex_home)

    def parse(self, s: State, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            s.session = event["thread_id"]
        elif kind == "turn.started":
            s.completed = False
        elif kind == "item.completed":
            item = table(event.get("item"))
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                s.final_text = item["text"]
            _step(s, item)
        elif kind == "turn.completed":
            usage = table(event.get("usage"))
            given = number(usage.get("input_tokens"))
            cached = min(number(usage.get("cached_input_tokens")), given)
            # The thread's running total: the last one per thread stands for the thread.
            s.per_call[s.session or ""] = Usage(
                given - cached, cached, number(usage.get("output_tokens"))
            )
            s.completed = True
        elif kind in ("error", "turn.failed"):
            error = table(event.get("error")) if kind == "turn.failed" else event
            message = error.get("message")
            text = message if isinstance(message, str) else "codex reported an error"
            s.failed = True
            s.error = text
            s.step("error", kind, text)
            if kind == "turn.failed":
                s.completed = True
            if error.get("status") == 429 or limit_text(text):
                s.limit(epoch_reset(text))


def _step(s: State, item: Mapping[str, Any]) -> None:
    """A finished item: a message, a command with its exit status, files changed, a tool."""
    kind = item.get("type")
    if kind == "agent_message":
        s.step("model", "message", item.get("text"))
    elif kind == "command_execution":
        code = item.get("exit_code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        s.step("tool", "shell", item.get("command"), ok=code == 0, exit_code=code)
    elif kind == "file_change":
        for change in item.get("changes") or []:
            change = table(change)
            what = change.get("kind") if isinstance(change.get("kind"), str) else "change"
            s.step("file", what, change.get("path"), ok=item.get("status") == "completed")
    elif kind in ("web_search", "mcp_tool_call"):
        s.step("tool", str(kind), item.get("query") or item.get("tool") or "")
