"""Loop breakers: an attempt whose model calls go round in circles is stopped before its cap.

Three patterns, each counted per attempt over its answered calls (docs/gateway.md "Loop
breakers"), each a setting of ``[breakers]`` (0 turns it off):

* ``same_request``: the same step again, K times in a row: the request's last tool calls and
  their results (the tail of its messages, tool ids and cache marks left out, so only what was
  asked and what came back counts) equal to those of the calls before it. The K-th is refused
  before it reaches the provider. A retry after an error answer is not counted (only answered
  calls are).
* ``no_progress``: N answered calls in a row that declare tools yet use none.
* ``cache_storm``: after the attempt's prompts were read from the cache (a call with at least
  ``cache_established`` of its prompt tokens read from it), M calls in a row of at least
  ``cache_min_prompt_tokens`` prompt tokens with less than ``cache_storm_share`` read from it.

A tripped breaker ends the attempt's model access: every later call of the attempt (of any of
its launches) is refused with ``402 billing_error`` naming it, as a cap does, and the launch's
status names it (``stop``), so the supervisor records the attempt's ending with the reason.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from agentc.gateway.meter import Api
from agentc.gateway.prices import Tokens

ATTEMPTS_KEPT = 50_000  # attempts whose counts are remembered (the oldest forgotten first)
_VOLATILE = frozenset({"id", "tool_use_id", "call_id", "cache_control", "signature"})
# Lines a harness writes into every tool result that differ each time (Codex's exec_command:
# "Chunk ID: e351e7", "Wall time: 0.0017 seconds"), measured with the pinned binaries.
_VOLATILE_LINES = re.compile(r"(?m)^(?:Chunk ID: [0-9a-f]+|Wall time: [0-9.]+ seconds)\n?")


@dataclass(frozen=True)
class BreakerLimits:
    """The thresholds (0: that breaker is off); the defaults are ``[breakers]``'s."""

    same_request: int = 5
    no_progress: int = 3
    cache_storm_calls: int = 4
    cache_storm_share: float = 0.2
    cache_established: float = 0.5
    cache_min_prompt_tokens: int = 4096

    @property
    def reads_body(self) -> bool:
        """Whether a call's body is read (its last tool calls, whether it declares tools)."""
        return self.same_request > 0 or self.no_progress > 0


def _stable(value: Any) -> Any:
    """``value`` without the keys that differ between two asks of the same thing."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    if isinstance(value, str):
        return _VOLATILE_LINES.sub("", value)
    return value


def _tool_blocks(api: Api, items: list[Any]) -> list[Any]:
    """The tool calls and tool results among ``items`` (messages or Responses input items)."""
    if api == "openai":
        kinds = ("function_call", "function_call_output", "custom_tool_call")
        return [i for i in items if isinstance(i, dict) and i.get("type") in kinds]
    found = []
    for message in items:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result"):
                found.append(block)
    return found


def fingerprint(api: Api, members: dict[str, Any]) -> str | None:
    """What a request asks for again when it is the same step: its last tool calls and their
    results (None: its tail holds none)."""
    items = members.get("messages" if api == "anthropic" else "input")
    if not isinstance(items, list) or not items:
        return None
    tail = _tool_blocks(api, items[-2:])
    if not tail:
        return None
    text = json.dumps(_stable(tail), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class _Attempt:
    last: str | None = None  # the last answered call's fingerprint
    same: int = 0  # answered calls in a row with it
    idle: int = 0  # answered calls in a row that declared tools and used none
    cached: bool = False  # a call read at least cache_established of its prompt from cache
    misses: int = 0  # calls in a row since, that read less than cache_storm_share
    tripped: tuple[str, str] | None = None  # (breaker, why)


class Breakers:
    """The breakers' counts per attempt (one event loop, but the lock keeps them whole)."""

    def __init__(self, limits: BreakerLimits) -> None:
        self.limits = limits
        self._attempts: OrderedDict[str, _Attempt] = OrderedDict()
        self._lock = threading.Lock()

    def _of(self, attempt: str) -> _Attempt:
        state = self._attempts.get(attempt)
        if state is None:
            state = self._attempts[attempt] = _Attempt()
            while len(self._attempts) > ATTEMPTS_KEPT:
                self._attempts.popitem(last=False)
        return state

    def tripped(self, attempt: str) -> tuple[str, str] | None:
        with self._lock:
            state = self._attempts.get(attempt)
            return state.tripped if state is not None else None

    def admit(self, attempt: str, print_: str | None) -> tuple[str, str] | None:
        """Before forwarding: the breaker this call trips (it is the K-th same step), if any."""
        most = self.limits.same_request
        if not most or print_ is None:
            return None
        with self._lock:
            state = self._of(attempt)
            if state.last == print_ and state.same + 1 >= most:
                why = f"the same tool calls with the same results {most} times in a row"
                state.tripped = state.tripped or ("same_request", why)
                return state.tripped
        return None

    def answered(
        self, attempt: str, print_: str | None, tools: bool, used_tools: bool, tokens: Tokens | None
    ) -> tuple[str, str] | None:
        """After a 2xx answer: count it; the breaker it trips, if any (later calls refused)."""
        with self._lock:
            state = self._of(attempt)
            if print_ is not None and print_ == state.last:
                state.same += 1
            else:
                state.last, state.same = print_, 1
            if tools:  # a side call (no tools declared) neither counts nor resets it
                state.idle = 0 if used_tools else state.idle + 1
            most = self.limits.no_progress
            if most and state.idle >= most and state.tripped is None:
                state.tripped = ("no_progress", f"{most} model calls in a row used no tool")
            self._cache(state, tokens)
            return state.tripped

    def _cache(self, state: _Attempt, tokens: Tokens | None) -> None:
        limits = self.limits
        if not limits.cache_storm_calls or tokens is None:
            return
        prompt = tokens.input + tokens.cache_write + tokens.cache_read
        if prompt < limits.cache_min_prompt_tokens:
            return
        share = tokens.cache_read / prompt
        if share >= limits.cache_established:
            state.cached, state.misses = True, 0
        elif state.cached and share < limits.cache_storm_share:
            state.misses += 1
            if state.misses >= limits.cache_storm_calls and state.tripped is None:
                state.tripped = (
                    "cache_storm",
                    f"{state.misses} calls in a row read less than "
                    f"{limits.cache_storm_share:.0%} of their prompt from the cache",
                )
        else:
            state.misses = 0
