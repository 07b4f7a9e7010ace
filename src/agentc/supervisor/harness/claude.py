"""Claude Code: its flags, environment, gateway settings and event stream (``stream-json``).

Pointed at the gateway with ``ANTHROPIC_BASE_URL`` + ``ANTHROPIC_API_KEY``; with the token opt-in
the role's token goes in ``CLAUDE_CODE_OAUTH_TOKEN``. It reads the role's protected
``claude-config`` tree, sources ``$RUN/claude-env.sh`` ahead of each Bash command (its login
shell resets PATH), and as a reviewer runs every command through candidate-shell
(``CLAUDE_CODE_SHELL_PREFIX``), so it is the one named harness that may review.

Its stream: the last ``result`` gives the totals (input = ``input_tokens`` +
``cache_creation_input_tokens``, cached = ``cache_read_input_tokens``) and the dollars
(``total_cost_usd`` when finite and >= 0); without a ``result`` the ``assistant`` usages are
summed, keeping the last per ``message.id``. The outcome comes from
``is_error``/``api_error_status``/``subtype``, never ``subtype`` alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentc.core.verdict import VERDICT_SCHEMA
from agentc.supervisor.harness.base import Adapter, LaunchRequest
from agentc.supervisor.harness.env import HarnessSetup, ModelEndpoint, root_url
from agentc.supervisor.harness.stream import (
    FILE_TOOLS,
    State,
    Usage,
    dollars_of,
    epoch_reset,
    limit_text,
    number,
    table,
)
from agentc.supervisor.launch.candidate_shell import SCRIPT

if TYPE_CHECKING:
    from agentc.supervisor.launch.rundir import RunLayout

ENV_FILE = "claude-env.sh"
REVIEWER_TOOLS = "Bash,Read,Glob,Grep"


def setup(endpoint: ModelEndpoint, *, max_retries: int | None = None) -> HarnessSetup:
    env = {"ANTHROPIC_BASE_URL": root_url(endpoint.base_url), "ANTHROPIC_API_KEY": endpoint.key}
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
    if endpoint.max_output_tokens is not None:  # it asks 64,000 a call by default
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(endpoint.max_output_tokens)
    return HarnessSetup(env)


def verdict_schema_json() -> str:
    """The verdict's JSON schema, compact, for Claude Code's ``--json-schema``."""
    return json.dumps(VERDICT_SCHEMA, separators=(",", ":"), sort_keys=True)


class Claude(Adapter):
    name = "claude"
    token_env = "CLAUDE_CODE_OAUTH_TOKEN"  # noqa: S105 (a variable name)
    confines_reviewer = True
    quiet_env = {
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }

    def args(self, request: LaunchRequest) -> tuple[str, ...]:
        args = ["-p", "--output-format", "stream-json", "--verbose"]
        args += ["--permission-mode", "dontAsk", "--strict-mcp-config"]
        args += ["--session-id", request.launch_id]  # Claude Code's session is the launch
        if request.role == "reviewer":  # read-only tools; the final result is the verdict
            args += ["--tools", REVIEWER_TOOLS, "--json-schema", verdict_schema_json()]
        return (*args, *(["--model", request.model] if request.model != "default" else []))

    def env(self, layout: RunLayout, request: LaunchRequest) -> dict[str, str]:
        env = {"CLAUDE_CONFIG_DIR": str(layout.claude_config)}
        # Claude Code's Bash runs a login shell, whose profile resets PATH: it sources this file
        # (written by the launch, read-only inside) ahead of each command to restore it.
        env["CLAUDE_ENV_FILE"] = str(layout.run / ENV_FILE)
        if request.role == "reviewer":
            env["CLAUDE_CODE_SHELL_PREFIX"] = str(layout.run / SCRIPT)
        return env

    def config_dir(self, layout: RunLayout) -> Path | None:
        return layout.claude_config

    def model_setup(self, endpoint: ModelEndpoint, *, home: Path, codex_home: Path) -> HarnessSetup:
        return setup(endpoint)

    def parse(self, s: State, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if isinstance(event.get("session_id"), str):
            s.session = event["session_id"]
        if kind == "system" and event.get("subtype") == "init":
            if isinstance(event.get("model"), str):
                s.model = event["model"]
        elif kind == "assistant":
            message = table(event.get("message"))
            model = message.get("model")
            if isinstance(model, str) and model != "<synthetic>":
                s.model = model
            if event.get("error") == "rate_limit" or message.get("error") == "rate_limit":
                s.limit(None)
            usage = table(message.get("usage"))
            call = Usage(
                number(usage.get("input_tokens"))
                + number(usage.get("cache_creation_input_tokens")),
                number(usage.get("cache_read_input_tokens")),
                number(usage.get("output_tokens")),
            )
            if isinstance(message.get("id"), str):
                s.per_call[message["id"]] = call
            else:
                s.anonymous = s.anonymous + call
            _steps(s, message.get("content"))
        elif kind == "user":
            for block in _blocks(table(event.get("message")).get("content")):
                if block.get("type") == "tool_result":
                    s.ended(block.get("tool_use_id"), block.get("is_error") is not True)
        elif kind == "rate_limit_event":
            info = table(event.get("rate_limit_info"))
            if info.get("status") == "rejected":
                resets = info.get("resetsAt")
                s.limit(number(resets) * 1000 if number(resets) else None)
        elif kind == "result":
            _result(s, event)


def _blocks(content: object) -> list[Mapping[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _steps(s: State, content: object) -> None:
    """An assistant message's text and tool calls (a file tool's call is a file written)."""
    for block in _blocks(content):
        if block.get("type") == "text":
            s.step("model", "message", block.get("text"))
        elif block.get("type") == "tool_use":
            name = block.get("name") if isinstance(block.get("name"), str) else "tool"
            args = table(block.get("input"))
            what = next(
                (args[k] for k in ("command", "file_path", "path", "pattern") if k in args), args
            )
            s.step("file" if name in FILE_TOOLS else "tool", name, what, ref=block.get("id"))


def _result(s: State, event: Mapping[str, Any]) -> None:
    s.completed = True
    usage = table(event.get("usage"))
    s.total = Usage(
        number(usage.get("input_tokens")) + number(usage.get("cache_creation_input_tokens")),
        number(usage.get("cache_read_input_tokens")),
        number(usage.get("output_tokens")),
    )
    s.usd = dollars_of(event.get("total_cost_usd"))
    s.usd_estimated = False
    text = event.get("result")
    s.final_text = text if isinstance(text, str) else None
    s.structured = event.get("structured_output")
    subtype = event.get("subtype")
    s.failed = event.get("is_error") is True or (
        isinstance(subtype, str) and subtype.startswith("error")
    )
    s.error = None
    if s.failed:
        s.error = s.final_text or (subtype if isinstance(subtype, str) else "error")
        limited = event.get("api_error_status") == 429 or limit_text(s.final_text or "")
        if limited:
            s.limit(epoch_reset(s.final_text or ""))
        s.step("error", subtype if isinstance(subtype, str) else "error", s.error)
