"""What a harness's event parser writes into, and the helpers every parser shares.

Light (no pricing, no I/O): the harness adapters import it, and a launch imports the adapters.
:mod:`agentc.supervisor.harness.events` reads a whole stream with them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LIMIT_PHRASES = ("rate limit", "rate_limit", "usage limit", "too many requests")
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

    def limit(self, reset_ms: int | None) -> None:
        self.rate_limited = True
        if reset_ms is not None:
            self.reset_ms = reset_ms
