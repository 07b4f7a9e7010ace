"""The script a scripted model provider plays: turns of text or tool calls, usage, failures.

A script is JSON validated here (unknown keys are refused, so a typo fails loudly instead of
silently playing a default). Tool calls are harness-neutral: ``run`` a command or ``write`` a
file; the provider maps them onto the tool names and input shapes the requesting harness
declared in its request's ``tools`` list (Claude Code ``Bash``/``Write``, Pi ``bash``/``write``,
Codex ``exec_command``). ``raw`` names a tool and its input verbatim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentc.core.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Usage(_Strict):
    """Token counts the provider reports, Anthropic-style: ``input_tokens`` is uncached input."""

    input_tokens: int = Field(default=10, ge=0)
    output_tokens: int = Field(default=5, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)


class RunCall(_Strict):
    tool: Literal["run"]
    command: str
    description: str = "Run a scripted command"


class WriteCall(_Strict):
    tool: Literal["write"]
    path: str
    content: str


class RawCall(_Strict):
    tool: Literal["raw"]
    name: str
    input: dict[str, object]


ToolCall = Annotated[RunCall | WriteCall | RawCall, Field(discriminator="tool")]


class Failure(_Strict):
    """A scripted failure instead of an answer.

    ``rate_limit``: HTTP 429 in the API's own error shape with reset headers (``retry-after``
    and the vendor's reset header, at ``reset_at`` epoch seconds or ``retry_after_s`` from now).
    ``usage_limit``: a subscription usage-limit error (429, usage-limit message and reset).
    ``server_error``: HTTP ``status`` (default 500) with an ``api_error`` body.
    ``hang``: accept the request and answer nothing for ``seconds`` (then drop the connection).
    ``malformed``: start a stream, then send a line that is not JSON and end it.
    """

    kind: Literal["rate_limit", "usage_limit", "server_error", "hang", "malformed"]
    status: int | None = Field(default=None, ge=400, le=599)
    retry_after_s: int = Field(default=60, ge=0)
    reset_at: int | None = None
    seconds: float = Field(default=3600.0, ge=0)
    message: str | None = None


class Pause(_Strict):
    """Stop mid-stream after ``after_events`` SSE events until ``gate`` opens or ``seconds``."""

    after_events: int = Field(default=1, ge=1)
    seconds: float = Field(default=30.0, ge=0)
    gate: str | None = None


class Turn(_Strict):
    """One scripted answer to one main-conversation request."""

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    failure: Failure | None = None
    pause: Pause | None = None
    repeat: int = Field(default=1, ge=1)


class Script(_Strict):
    """A whole script: turns played in order to main requests, plus what to do after."""

    turns: list[Turn] = Field(default_factory=list)
    # What a request gets once the turns ran out, and what side requests (no tools) get.
    after: Turn = Field(default_factory=lambda: Turn(text="Done."))
    side: Turn = Field(default_factory=lambda: Turn(text="OK", usage=Usage(output_tokens=1)))

    def expanded(self) -> list[Turn]:
        """The turns with ``repeat`` unrolled."""
        out: list[Turn] = []
        for turn in self.turns:
            out.extend([turn] * turn.repeat)
        return out


def parse_script(data: str | bytes | dict[str, object], *, source: str = "script") -> Script:
    """Validate a script from JSON text or a decoded object; errors say where, never guess."""
    try:
        if isinstance(data, (str, bytes)):
            return Script.model_validate_json(data)
        return Script.model_validate(data)
    except ValidationError as exc:
        lines = [f"{source}: invalid script ({exc.error_count()} problem(s))"]
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            lines.append(f"  {where}: {err['msg']}")
        raise ConfigError("\n".join(lines)) from None


def load_script(path: Path) -> Script:
    """Read and validate a JSON script file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read script: {exc.strerror}") from None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno})") from None
    return parse_script(text, source=str(path))
