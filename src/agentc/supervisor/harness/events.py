"""Read a harness's event stream (one JSON value per line) into a :class:`RunSummary`.

The stream is fed incrementally (the loop tails ``events.jsonl`` while the launch runs) and may
end mid-line when the harness was killed: a partial last line is ignored, as is any line that is
not a JSON object (blank lines, ``#`` comments, garbage). Tool output is never inspected.

Each harness's own parser is in its adapter (:mod:`agentc.supervisor.harness.claude`, ...).
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentc.gateway.prices import DEFAULT_PRICES, Price, Tokens, dollars, lookup
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.stream import State, Usage

MAX_LINE = 16 << 20  # a longer line is dropped, never buffered without bound

__all__ = ["MAX_LINE", "RunSummary", "StreamReader", "Usage", "summarize"]


@dataclass(frozen=True)
class RunSummary:
    harness: str
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
    steps: tuple[dict[str, Any], ...] = ()  # what the agent did (Step.view), the first MAX_STEPS
    steps_dropped: int = 0


class StreamReader:
    """Feed a harness's stdout bytes as they come; :meth:`summary` at any point."""

    def __init__(self, harness: str) -> None:
        adapter = registry.named(harness)
        if adapter is None:
            raise ValueError(f"unknown harness {harness!r}; expected one of {registry.names()}")
        self.harness = harness
        self._buffer = b""
        self._state = State()
        self._apply = adapter.parse

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

    def current_step(self) -> str | None:
        """The newest step so far in a line (``Bash: git commit -m x``), or None."""
        last = self._state.last
        return None if last is None else f"{last.name}: {last.detail}"[:300].rstrip(": ")

    def summary(
        self, *, model: str | None = None, prices: Mapping[str, Price] = DEFAULT_PRICES
    ) -> RunSummary:
        """The run so far; ``model`` is the configured model, used when the stream names none."""
        s = self._state
        usage = s.total if s.total is not None else sum(s.per_call.values(), s.anonymous)
        usd, estimated, reason, priced = s.usd, s.usd_estimated, None, None
        run_model = s.model or model
        if usd is None and s.own_priced:  # the harness priced its calls itself (Pi)
            usd, estimated = round(s.own_usd, 6), True
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
            steps=tuple(step.view() for step in s.steps),
            steps_dropped=s.steps_dropped,
        )


def summarize(
    harness: str,
    data: bytes,
    *,
    model: str | None = None,
    prices: Mapping[str, Price] = DEFAULT_PRICES,
) -> RunSummary:
    """Summarize a whole stream (a trailing partial line, as a killed run leaves, is ignored)."""
    reader = StreamReader(harness)
    reader.feed(data)
    return reader.summary(model=model, prices=prices)
