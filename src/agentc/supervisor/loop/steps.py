"""What the loop records about a settled attempt's run for the console (decision D45): the
agent's steps from its harness's event stream (:attr:`RunSummary.steps`), its cost and tokens,
its duration, and how it ended and why.

Sent with the loop's own credential (the attempt's role's), never the launch's. Bounded: the
parsers keep the first ``MAX_STEPS``, and the loop keeps as many of those as fit in
``[run] steps_max_kib`` of JSON (the rest are counted). The steps are agent text: a body the
coordinator refuses for a secret is sent again without the steps, the model's name and the
harness's error, the note naming the refusal (never the secret). Recording is best effort, like
the patch's: a failure is logged and the settling goes on.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentc.core.errors import AgentcError
from agentc.core.model import RunEnding
from agentc.files import open_regular
from agentc.gateway.prices import Price
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.events import RunSummary, StreamReader
from agentc.supervisor.loop import artifacts

if TYPE_CHECKING:
    from agentc.client.ops import Agent

_READ = 1 << 20
# How a launch ended when no supervisor watched it: the next loop settles it from its record.
UNWATCHED = "its launch ended while no supervisor watched it (crash or restart)"


@dataclass(frozen=True)
class Ending:
    """How an attempt's run ended (``submitted``, ``released``, ``killed``, ``limit_hit``) and
    why, in the supervisor's words."""

    kind: RunEnding
    why: str


def ending_of(
    state: str | None,
    *,
    stopped: str | None,
    at_limit: bool,
    rate_limited: bool,
    exited: str,
    gateway_stop: str | None = None,
) -> Ending:
    """The ending of a run from what the loop saw: the attempt's state after the run, why the
    loop stopped the launch (None: it ended by itself), whether that was the role's time limit,
    whether the stream told a vendor's rate limit, how the process ended (``exited``), and
    what ended its model calls at the gateway (a cap, the model policy, a loop breaker)."""
    if state == "submitted":
        return Ending("submitted", f"the agent submitted its work; {exited}")
    if rate_limited:
        return Ending("limit_hit", f"the vendor's rate limit stopped the agent; {exited}")
    if gateway_stop is not None:
        return Ending("limit_hit", f"the model gateway ended its calls: {gateway_stop}; {exited}")
    if stopped is not None:
        return Ending(
            "limit_hit" if at_limit else "killed", f"the supervisor stopped it: {stopped}"
        )
    if state == "released":
        return Ending("released", "the agent released the attempt")
    if state not in (None, "active"):  # nothing to release: it lapsed, or was taken over
        return Ending("released", f"{exited}; the attempt was already {state}")
    return Ending("released", f"{exited}; the supervisor released the attempt")


class Tail:
    """The running launch's ``events.jsonl`` read as it grows (never following a link), for
    the current step the loop tells with each renewal; nothing for a ``command:`` agent."""

    def __init__(self, run: Path, harness: str) -> None:
        self.path, self.offset = run / "events.jsonl", 0
        known = not registry.is_command(harness) and registry.named(harness) is not None
        self.reader = StreamReader(harness) if known else None

    def current(self) -> str | None:
        if self.reader is None:
            return None
        try:
            with open_regular(self.path) as handle:
                handle.seek(self.offset)
                while chunk := handle.read(_READ):
                    self.reader.feed(chunk)
                    self.offset += len(chunk)
        except OSError:
            pass
        return self.reader.current_step()


def last_written(run: Path) -> int | None:
    """When the launch last wrote its event stream (ms), the end of a run no supervisor
    watched; None without one."""
    try:
        return int(os.stat(run / "events.jsonl", follow_symlinks=False).st_mtime * 1000)
    except OSError:
        return None


def summary_of(
    run: Path, harness: str, model: str | None, prices: Mapping[str, Price]
) -> RunSummary | None:
    """The run's ``events.jsonl`` read by its harness's parser (never following a link); None
    without one, or for a ``command:`` agent (its output is its own, not a known stream)."""
    if registry.is_command(harness) or registry.named(harness) is None:
        return None
    try:
        handle = open_regular(run / "events.jsonl")
    except OSError:
        return None
    reader = StreamReader(harness)
    with handle:
        while chunk := handle.read(_READ):
            reader.feed(chunk)
    return reader.summary(model=model, prices=prices)


def body_of(
    summary: RunSummary | None,
    harness: str,
    ending: Ending,
    *,
    started_ms: int | None,
    max_bytes: int,
    ended_ms: int | None = None,
) -> dict[str, Any]:
    """The body of ``POST .../artifacts/steps``: the steps that fit in ``max_bytes``; the
    duration from ``started_ms`` to ``ended_ms`` (None: now)."""
    now = ended_ms if ended_ms is not None else int(time.time() * 1000)
    body: dict[str, Any] = {
        "harness": harness.split(":", 1)[0][:200],
        "ending": ending.kind,
        "why": ending.why[:2000],
        "started_at_ms": started_ms,
        "duration_ms": max(0, now - started_ms) if started_ms is not None else 0,
        "steps": [],
    }
    if summary is None:
        return body
    kept, size = [], 0
    for step in summary.steps:
        size += len(json.dumps(step)) + 1
        if size > max_bytes:
            break
        kept.append(step)
    body.update(
        model=summary.model[:200] if summary.model else None,
        steps=kept,
        steps_dropped=summary.steps_dropped + len(summary.steps) - len(kept),
        error=summary.error[:2000] if summary.error else None,
        usd=float(summary.usd) if summary.usd is not None else None,
        usd_estimated=summary.usd_estimated,
        input_tokens=summary.usage.input_tokens,
        cached_input_tokens=summary.usage.cached_input_tokens,
        output_tokens=summary.usage.output_tokens,
    )
    return body


def record(client: Agent, attempt_id: str, body: dict[str, Any]) -> str:
    """Send the attempt's steps; what happened, in words (never raises)."""

    def bare(note: str) -> dict[str, Any]:
        return {**body, "steps": None, "model": None, "error": None, "note": note}

    try:
        said = artifacts.send(client, attempt_id, "steps", body, bare)
    except (AgentcError, OSError) as exc:  # never stops the settling
        return f"the steps were not recorded: {exc}"
    if said == "exists":
        return "the steps were recorded before"
    if said is not None:
        return f"recorded the run's ending ({body['ending']}) without its steps: {said}"
    return f"recorded {len(body['steps'])} steps ({body['ending']})"


def gateway_stop(terminal: dict[str, Any]) -> str | None:
    """What ended the launch's model calls at the gateway, in words, from its terminal record
    (``stop``: a cap, the model policy's turns, a loop breaker), or None."""
    stop = terminal.get("stop")
    if not isinstance(stop, dict):
        return None
    reason = stop.get("reason") or stop.get("name")
    return f"{stop.get('kind')} {stop.get('name')}: {reason}"[:1000] if reason else None
