"""Read a harness's event stream (one JSON value per line) into a :class:`RunSummary`.

The stream is fed incrementally (the loop tails ``events.jsonl`` while the launch runs) and may
end mid-line when the harness was killed: a partial last line is ignored, as is any line that is
not a JSON object (blank lines, ``#`` comments, garbage). Tool output is never inspected.

Per harness (field paths from the recorded streams in ``shared/fixtures/harness-events``):

- Claude (``stream-json``): the last ``result`` gives the totals (input = ``input_tokens`` +
  ``cache_creation_input_tokens``, cached = ``cache_read_input_tokens``) and the dollars
  (``total_cost_usd`` when finite and >= 0); without a ``result`` the ``assistant`` usages are
  summed, keeping the last per ``message.id``, and priced (estimated). The outcome comes from
  ``is_error``/``api_error_status``/``subtype``, never ``subtype`` alone.
- Codex (``exec --json``): ``turn.completed.usage`` is the thread's running total, so the last
  one per thread counts; fresh input = ``input_tokens - cached_input_tokens``; no dollars (priced
  from the table when the model is known). ``error``/``turn.failed`` end the run as failed.
- Pi (``--mode json``): each assistant ``message_end`` carries its call's usage and a cost that
  Pi computes from its own catalog (an estimate); ``agent_end`` closes the run.

A rate limit (Claude's rejected ``rate_limit_event``, a 429, or a limit phrase in an error)
sets ``rate_limited`` and, where the stream says when, ``reset_ms``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentc.core.roles import HARNESSES, Harness
from agentc.gateway.prices import DEFAULT_PRICES, Price, Tokens, dollars, lookup

MAX_LINE = 16 << 20  # a longer line is dropped, never buffered without bound

_LIMIT_PHRASES = ("rate limit", "rate_limit", "usage limit", "too many requests")
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


@dataclass(frozen=True)
class RunSummary:
    harness: Harness
    usage: Usage
    usd: float | None  # None: unpriced (see unpriced_reason)
    usd_estimated: bool
    model: str | None
    completed: bool  # the harness wrote its end-of-run event
    failed: bool  # it ended the run with an error
    error: str | None
    final_text: str | None
    structured_output: Any
    rate_limited: bool
    reset_ms: int | None
    harness_session: str | None  # Claude's session_id, Codex's thread_id, Pi's session id
    events: int
    unpriced_reason: str | None = None
    priced_model: str | None = None


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(int(value), 0)


def _dollars(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _limit_text(text: str) -> bool:
    lowered = text.lower()
    return any(phrase in lowered for phrase in _LIMIT_PHRASES)


def _epoch_reset(text: str) -> int | None:
    match = _EPOCH_SUFFIX.search(text)
    return int(match[1]) * 1000 if match else None


@dataclass
class _State:
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
    pi_usd: float = 0.0
    pi_priced: bool = False

    def limit(self, reset_ms: int | None) -> None:
        self.rate_limited = True
        if reset_ms is not None:
            self.reset_ms = reset_ms


class StreamReader:
    """Feed a harness's stdout bytes as they come; :meth:`summary` at any point."""

    def __init__(self, harness: Harness) -> None:
        if harness not in HARNESSES:
            raise ValueError(f"unknown harness {harness!r}; expected one of {HARNESSES}")
        self.harness = harness
        self._buffer = b""
        self._state = _State()
        self._apply = {"claude": _claude, "codex": _codex, "pi": _pi}[harness]

    def feed(self, data: bytes) -> None:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > MAX_LINE:
            self._buffer = b""
        for line in lines:
            self._line(line)

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").strip()
        if not text or text.startswith("#") or len(raw) > MAX_LINE:
            return
        try:
            event = json.loads(text)
        except ValueError:
            return
        if isinstance(event, dict):
            self._state.events += 1
            self._apply(self._state, event)

    def summary(
        self, *, model: str | None = None, prices: Mapping[str, Price] = DEFAULT_PRICES
    ) -> RunSummary:
        """The run so far; ``model`` is the configured model, used when the stream names none."""
        s = self._state
        usage = s.total if s.total is not None else sum(s.per_call.values(), s.anonymous)
        usd, estimated, reason, priced = s.usd, s.usd_estimated, None, None
        run_model = s.model or model
        if usd is None and self.harness == "pi" and s.pi_priced:
            usd, estimated = round(s.pi_usd, 6), True
        if usd is None and usage.total:
            found = next((f for k in (s.model, model) if k and (f := lookup(k, prices))), None)
            if found is None:
                reason = f"no price for model {run_model or 'unknown'}"
            else:
                entry, price = found
                # Fresh input (cache writes included: the stream does not tell them apart) at
                # the input rate, cached input at the cache-read rate: an estimate.
                tokens = Tokens(
                    input=usage.input_tokens,
                    cache_read=usage.cached_input_tokens,
                    output=usage.output_tokens,
                )
                usd = round(dollars(tokens, price), 6)
                estimated = True
                priced = entry if entry != run_model else None
        elif usd is None:
            usd = 0.0
        return RunSummary(
            harness=self.harness,
            usage=usage,
            usd=usd,
            usd_estimated=estimated,
            model=run_model,
            completed=s.completed,
            failed=s.failed,
            error=s.error,
            final_text=s.final_text,
            structured_output=s.structured,
            rate_limited=s.rate_limited,
            reset_ms=s.reset_ms,
            harness_session=s.session,
            events=s.events,
            unpriced_reason=reason,
            priced_model=priced,
        )


def summarize(
    harness: Harness,
    data: bytes,
    *,
    model: str | None = None,
    prices: Mapping[str, Price] = DEFAULT_PRICES,
) -> RunSummary:
    """Summarize a whole stream (a trailing partial line, as a killed run leaves, is ignored)."""
    reader = StreamReader(harness)
    reader.feed(data)
    return reader.summary(model=model, prices=prices)


def _claude(s: _State, event: Mapping[str, Any]) -> None:
    kind = event.get("type")
    if isinstance(event.get("session_id"), str):
        s.session = event["session_id"]
    if kind == "system" and event.get("subtype") == "init":
        if isinstance(event.get("model"), str):
            s.model = event["model"]
    elif kind == "assistant":
        message = _dict(event.get("message"))
        model = message.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            s.model = model
        if event.get("error") == "rate_limit" or message.get("error") == "rate_limit":
            s.limit(None)
        usage = _dict(message.get("usage"))
        call = Usage(
            _int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens")),
            _int(usage.get("cache_read_input_tokens")),
            _int(usage.get("output_tokens")),
        )
        if isinstance(message.get("id"), str):
            s.per_call[message["id"]] = call
        else:
            s.anonymous = s.anonymous + call
    elif kind == "rate_limit_event":
        info = _dict(event.get("rate_limit_info"))
        if info.get("status") == "rejected":
            resets = info.get("resetsAt")
            s.limit(_int(resets) * 1000 if _int(resets) else None)
    elif kind == "result":
        _claude_result(s, event)


def _claude_result(s: _State, event: Mapping[str, Any]) -> None:
    s.completed = True
    usage = _dict(event.get("usage"))
    s.total = Usage(
        _int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens")),
        _int(usage.get("cache_read_input_tokens")),
        _int(usage.get("output_tokens")),
    )
    s.usd = _dollars(event.get("total_cost_usd"))
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
        limited = event.get("api_error_status") == 429 or _limit_text(s.final_text or "")
        if limited:
            s.limit(_epoch_reset(s.final_text or ""))


def _codex(s: _State, event: Mapping[str, Any]) -> None:
    kind = event.get("type")
    if kind == "thread.started" and isinstance(event.get("thread_id"), str):
        s.session = event["thread_id"]
    elif kind == "turn.started":
        s.completed = False
    elif kind == "item.completed":
        item = _dict(event.get("item"))
        if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            s.final_text = item["text"]
    elif kind == "turn.completed":
        usage = _dict(event.get("usage"))
        given = _int(usage.get("input_tokens"))
        cached = min(_int(usage.get("cached_input_tokens")), given)
        # The thread's running total: the last one per thread stands for the thread.
        s.per_call[s.session or ""] = Usage(
            given - cached, cached, _int(usage.get("output_tokens"))
        )
        s.completed = True
    elif kind in ("error", "turn.failed"):
        error = _dict(event.get("error")) if kind == "turn.failed" else event
        message = error.get("message")
        text = message if isinstance(message, str) else "codex reported an error"
        s.failed = True
        s.error = text
        if kind == "turn.failed":
            s.completed = True
        if error.get("status") == 429 or _limit_text(text):
            s.limit(_epoch_reset(text))


def _pi(s: _State, event: Mapping[str, Any]) -> None:
    kind = event.get("type")
    if kind == "session" and isinstance(event.get("id"), str):
        s.session = event["id"]
    elif kind == "message_end":
        message = _dict(event.get("message"))
        if message.get("role") != "assistant":
            return
        if isinstance(message.get("model"), str):
            s.model = message["model"]
        usage = _dict(message.get("usage"))
        s.anonymous = s.anonymous + Usage(
            _int(usage.get("input")) + _int(usage.get("cacheWrite")),
            _int(usage.get("cacheRead")),
            _int(usage.get("output")),
        )
        cost = _dollars(_dict(usage.get("cost")).get("total"))
        if cost is not None:
            s.pi_usd += cost
            s.pi_priced = True
        texts = [
            block["text"]
            for block in message.get("content") or []
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        if texts:
            s.final_text = "".join(texts)
        if message.get("stopReason") == "error":
            error = message.get("errorMessage")
            s.failed = True
            s.error = error if isinstance(error, str) else "pi reported an error"
            if _limit_text(s.error):
                s.limit(None)
        elif message.get("stopReason") in ("stop", "toolUse", "length"):
            s.failed = False
            s.error = None
    elif kind == "agent_end":
        s.completed = event.get("willRetry") is not True
