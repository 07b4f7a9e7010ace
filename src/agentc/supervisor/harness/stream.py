"""What a harness's event parser writes into, and the helpers every parser shares.

Light (no pricing, no I/O): the harness adapters import it, and a launch imports the adapters.
:mod:`agentc.supervisor.harness.events` reads a whole stream with them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentc.core.model import STEP_EXIT_MAX, STEP_EXIT_MIN

LIMIT_PHRASES = ("rate limit", "rate_limit", "usage limit", "too many requests")
MAX_STEPS = 500  # steps kept per run (the first ones; later ones are counted, not kept)
MAX_DETAIL = 500  # characters of a step's detail (a command, a path, a message's start)
FILE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "write", "edit"})
_EPOCH_SUFFIX = re.compile(r"\|(\d{9,12})\s*$")


@dataclass(frozen=True)
class Usage:
    """Tokens of one run: fresh input (cache writes included), cached input, output."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
        )

    @property
    def total(self) -> int:
        return self.input_tokens + self.cached_input_tokens + self.output_tokens


def number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(int(value), 0)


def dollars_of(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def table(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def limit_text(text: str) -> bool:
    lowered = text.lower()
    return any(phrase in lowered for phrase in LIMIT_PHRASES)


def epoch_reset(text: str) -> int | None:
    match = _EPOCH_SUFFIX.search(text)
    return int(match[1]) * 1000 if match else None


@dataclass
class Step:
    """One thing the agent did, as its stream tells it: a model's message (``model``), a tool
    call (``tool``: its name, its command or argument, whether it succeeded, its exit status),
    a file written (``file``) or an error (``error``). Agent text: bounded, never trusted."""

    kind: str
    name: str
    detail: str
    ok: bool | None = None
    exit_code: int | None = None
    ref: str | None = None  # the harness's id of a tool call, to match its result

    def view(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "ref" and v is not None}


def detail_of(value: object) -> str:
    """A step's detail: a string as it is, anything else as compact JSON; bounded, without
    NUL (the coordinator stores text PostgreSQL can hold, and refuses a NUL)."""
    if not isinstance(value, str):
        value = "" if value is None else json.dumps(value, separators=(",", ":"), default=str)
    return " ".join(value.replace("\x00", "\ufffd").split())[:MAX_DETAIL]


def exit_code_of(value: object) -> int | None:
    """An exit status a harness reported, or None when it is none the coordinator stores."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if STEP_EXIT_MIN <= value <= STEP_EXIT_MAX else None


@dataclass
class State:
    events: int = 0
    model: str | None = None
    session: str | None = None
    completed: bool = False
    failed: bool = False
    error: str | None = None
    final_text: str | None = None
    structured: Any = None
    rate_limited: bool = False
    reset_ms: int | None = None
    total: Usage | None = None  # authoritative totals (Claude's result)
    usd: float | None = None
    usd_estimated: bool = False
    per_call: dict[str, Usage] = field(default_factory=dict)
    anonymous: Usage = field(default_factory=Usage)
    own_usd: float = 0.0  # dollars the harness computed itself (Pi), when it did
    own_priced: bool = False
    steps: list[Step] = field(default_factory=list)
    steps_dropped: int = 0
    last: Step | None = None  # the newest step, kept or not (what the agent is doing now)

    def step(self, kind: str, name: object, detail: object = "", **more: Any) -> None:
        named = detail_of(name)[:100] if isinstance(name, str) and name.strip() else kind
        if "exit_code" in more:
            more["exit_code"] = exit_code_of(more["exit_code"])
        self.last = Step(kind, named, detail_of(detail), **more)
        if len(self.steps) >= MAX_STEPS:
            self.steps_dropped += 1
            return
        self.steps.append(self.last)

    def ended(self, ref: object, ok: bool, exit_code: int | None = None) -> None:
        """A tool call's result: marks the newest step of that call."""
        for step in reversed(self.steps):
            if ref is not None and step.ref == ref:
                step.ok, step.exit_code = ok, exit_code_of(exit_code)
                return

    def limit(self, reset_ms: int | None) -> None:
        self.rate_limited = True
        if reset_ms is not None:
            self.reset_ms = reset_ms
