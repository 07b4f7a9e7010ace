"""What the gateway writes about each call: its log line and its ledger row (docs/gateway.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentc.core.rules import rfc3339
from agentc.gateway.prices import Cost, Tokens
from agentc.gateway.sentinels import Grant


@dataclass
class Call:
    """What one call's log line and ledger row are made of."""

    grant: Grant | None
    method: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    ttfb: float | None = None
    status: int = 0
    outcome: str = "ok"
    reason: str | None = None
    cap: str | None = None
    policy: str | None = None  # the model policy's rule that refused the call
    breaker: str | None = None  # the loop breaker that refused it
    tools: bool = False  # the request declares tools (read when a breaker reads bodies)
    step: str | None = None  # its last tool calls and results, hashed (breakers.fingerprint)
    estimated: bool = False  # the tokens are an estimate (the final usage never came)

    def note(self, reason: str) -> None:
        self.reason = f"{self.reason}; {reason}" if self.reason else reason


def _grant_fields(grant: Grant | None) -> dict[str, Any]:
    """The launch a record is about (all null for a call refused before its grant was known)."""
    return {
        "session": grant.launch_id if grant else None,
        "attempt": grant.attempt if grant else None,
        "generation": grant.generation if grant else None,
        "role": grant.role_slug if grant else None,
        "task": grant.task if grant else None,
        "upstream": grant.upstream if grant else None,
        "agentns_session_id": grant.agentns_session_id if grant else None,
        "agentns_mode": grant.agentns_mode if grant else None,
    }


def _usd_of(cost: Cost | None) -> float | None:
    return round(cost.usd, 6) if cost and cost.usd is not None else None


def log_line(
    call: Call, tokens: Tokens | None, model: str | None, cost: Cost | None, now_ms: int
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "at": rfc3339(now_ms),
        "event": "model_call",
        **_grant_fields(call.grant),
        "method": call.method,
        "path": call.path,
        "model": model,
        "status": call.status,
        "outcome": call.outcome,
        "input_tokens": tokens.input if tokens else None,
        "cache_write_tokens": tokens.cache_write if tokens else None,
        "cache_read_tokens": tokens.cache_read if tokens else None,
        "output_tokens": tokens.output if tokens else None,
        "usd": _usd_of(cost),
        "ms": round((time.perf_counter() - call.started) * 1000, 2),
        "ttfb_ms": round((call.ttfb - call.started) * 1000, 2) if call.ttfb else None,
    }
    if call.estimated:
        line["estimated"] = True
    if call.cap:
        line["cap"] = call.cap
    if call.policy:
        line["policy"] = call.policy
    if call.breaker:
        line["breaker"] = call.breaker
    if call.reason:
        line["reason"] = call.reason.strip()
    return line


# What a model call's line in the launch's event log keeps of its log line (its grant's fields
# name the launch the log is of).
_EVENT_KEYS = (
    "method", "path", "model", "status", "outcome", "input_tokens", "cache_write_tokens",
    "cache_read_tokens", "output_tokens", "usd", "ms", "estimated", "cap", "policy", "breaker",
    "reason",
)  # fmt: skip


def launch_event(line: dict[str, Any]) -> dict[str, Any]:
    """The call's event for the launch's log (agentc.files.launchlog)."""
    return {"event": "model_call", **{k: line[k] for k in _EVENT_KEYS if k in line}}


def ledger_row(
    call: Call,
    grant: Grant,
    tokens: Tokens | None,
    model: str | None,
    cost: Cost | None,
    now_ms: int,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "at_ms": now_ms,
        **_grant_fields(grant),
        "project": grant.project,
        "model": model,
        "input_tokens": tokens.input if tokens else 0,
        "cache_write_tokens": tokens.cache_write if tokens else 0,
        "cache_read_tokens": tokens.cache_read if tokens else 0,
        "output_tokens": tokens.output if tokens else 0,
        "usd": _usd_of(cost) if tokens else 0.0,
        "usd_for_caps": round(cost.usd_for_caps, 6) if cost else 0.0,
        "status": call.status,
    }
    if cost and cost.priced_model and cost.priced_model != model:
        row["priced_model"] = cost.priced_model
    if cost and cost.unpriced_reason:
        row["usd_unpriced_reason"] = cost.unpriced_reason
    if call.estimated:
        row["estimated"] = True
    if grant.canary:
        row["canary"] = True
    if call.cap:
        row["refused_cap"] = call.cap
        row["reason"] = call.reason
    return row


def usd_text(value: float) -> str:
    return f"${value:.2f}" if value >= 1 else f"${value:.4g}"
