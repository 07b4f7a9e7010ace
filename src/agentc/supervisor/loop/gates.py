"""The loop's pure decisions: renewal gates, back-off and admission (no I/O, no clock reads).

Every figure is passed in: liveness and stream age are measured by the caller on the host, the
checkpoint age on the service's clock (``progress_age_ms`` from the coordinator's attempt view),
so a skewed host clock cannot keep a stalled launch alive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

EVENTS_STALE_SECONDS = 15 * 60
CHECKPOINT_STALE_MS = 60 * 60 * 1000
BACKOFF_FIRST_SECONDS = 30.0
BACKOFF_CAP_SECONDS = 300.0


@dataclass(frozen=True)
class Progress:
    """What the loop knows about one running launch at a renewal."""

    events_age_seconds: float  # since the event stream last changed (or the launch started)
    progress_age_ms: int  # since the attempt's last checkpoint or claim, on the service clock
    elapsed_seconds: float  # since the launch started


def drain_reason(
    progress: Progress,
    *,
    budget_minutes: float,
    events_stale_seconds: float = EVENTS_STALE_SECONDS,
    checkpoint_stale_ms: int = CHECKPOINT_STALE_MS,
) -> str | None:
    """None when the lease may be renewed, else why the launch is drained (for the handoff)."""
    if progress.events_age_seconds >= events_stale_seconds:
        return (
            f"no harness events for {int(progress.events_age_seconds // 60)} minutes "
            f"(limit {int(events_stale_seconds // 60)})"
        )
    if progress.progress_age_ms >= checkpoint_stale_ms:
        return (
            f"no checkpoint for {progress.progress_age_ms // 60_000} minutes "
            f"(limit {checkpoint_stale_ms // 60_000})"
        )
    if progress.elapsed_seconds >= budget_minutes * 60:
        return f"the launch used its budget of {budget_minutes:g} minutes"
    return None


class Backoff:
    """Delays after a transient renewal failure: 30 s, doubling, capped at 5 minutes."""

    def __init__(
        self, first: float = BACKOFF_FIRST_SECONDS, cap: float = BACKOFF_CAP_SECONDS
    ) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def failure(self) -> float:
        """Record a failure; the delay before the next try."""
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return delay

    def success(self) -> None:
        self._next = self.first


@dataclass(frozen=True)
class Vendor:
    """A model vendor the host may use, and until when (epoch ms) it is unusable, if at all."""

    name: str
    unusable_until_ms: int | None = None
    unusable_reason: str | None = None  # e.g. "signed out", "credential expired"


def choose_vendor(vendors: Sequence[Vendor], now_ms: int) -> tuple[Vendor | None, list[str]]:
    """The first usable vendor (primary, then fallback) and the reasons the others were skipped."""
    reasons: list[str] = []
    for vendor in vendors:
        if vendor.unusable_reason:
            reasons.append(f"{vendor.name}: {vendor.unusable_reason}")
        elif vendor.unusable_until_ms is not None and vendor.unusable_until_ms > now_ms:
            reasons.append(
                f"{vendor.name}: rate-limited for {(vendor.unusable_until_ms - now_ms) // 1000} s"
            )
        else:
            return vendor, reasons
    return None, reasons


@dataclass(frozen=True)
class HostState:
    """The host's side of admission, measured by the caller."""

    free_mib: int
    kill_switch: bool  # the kill-switch file exists (an unreadable path counts as set)
    spent_24h_usd: float
    quiet: str | None = None  # why quiet hours hold new claims now (core.quiet), if they do
    free_memory_mib: int | None = None  # the host's available memory (None: not known)
    reserved_usd: float = 0.0  # what the role's running launches may still spend
    running: int = 0  # how many launches of the role run now


def admission_holds(
    host: HostState,
    *,
    min_free_mib: int,
    daily_cap_usd: float | None,
    vendors: Sequence[Vendor],
    now_ms: int,
    min_free_memory_mib: int = 0,
) -> tuple[Vendor | None, dict[str, str]]:
    """The vendor to claim with, or None and every reason this host must not claim now, each
    under its code (``kill_switch``, ``quiet_hours``, ``disk``, ``memory``, ``cost_cap``,
    ``cost_reserve``, ``vendor``: the heartbeat carries them for the attention checks)."""
    holds: dict[str, str] = {}
    if host.kill_switch:
        holds["kill_switch"] = "the kill switch is set"
    if host.quiet is not None:
        holds["quiet_hours"] = host.quiet
    if host.free_mib < min_free_mib:
        holds["disk"] = f"only {host.free_mib} MiB free (min_free_mib is {min_free_mib})"
    memory = host.free_memory_mib
    if memory is not None and memory < min_free_memory_mib:
        holds["memory"] = (
            f"only {memory} MiB of memory available (min_free_memory_mib is {min_free_memory_mib})"
        )
    holds.update(_cost_holds(host, daily_cap_usd))
    vendor, skipped = choose_vendor(vendors, now_ms)
    if vendor is None:
        holds["vendor"] = "no vendor is usable: " + "; ".join(skipped or ["none configured"])
    return (vendor if not holds else None), holds


def _cost_holds(host: HostState, cap: float | None) -> dict[str, str]:
    """``cost_cap`` once the day's spend reached the cap; ``cost_reserve`` while it has not,
    but the running launches may still spend the rest."""
    if cap is None:
        return {}
    spent = host.spent_24h_usd
    if spent >= cap:
        return {"cost_cap": f"the daily cost cap is reached (${spent:.2f} of ${cap:.2f})"}
    if spent + host.reserved_usd >= cap:
        return {
            "cost_reserve": (
                f"the daily cost cap may be reached by the {host.running} running launches "
                f"(${spent:.2f} spent and ${host.reserved_usd:.2f} reserved, of ${cap:.2f})"
            )
        }
    return {}


def unusable(vendors: Sequence[Vendor], now_ms: int) -> list[dict[str, object]]:
    """The vendors that cannot be used now and why (for the heartbeat)."""
    return [
        {"name": v.name, "reason": v.unusable_reason, "until_ms": v.unusable_until_ms}
        for v in vendors
        if v.unusable_reason or (v.unusable_until_ms is not None and v.unusable_until_ms > now_ms)
    ]


def _epoch_ms(value: object) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        return None


def progress_age_ms(attempt: Mapping[str, object]) -> int | None:
    """Checkpoint age on the service's clock, from the coordinator's attempt view.

    The service's now is ``expires_at - lease_remaining_ms``; the age is that minus
    ``last_progress_at`` (RFC 3339 times in the view), never negative; None if not known.
    """
    expires = _epoch_ms(attempt.get("expires_at"))
    progress = _epoch_ms(attempt.get("last_progress_at"))
    remaining = attempt.get("lease_remaining_ms")
    if expires is None or progress is None or not isinstance(remaining, int):
        return None
    return max(0, expires - remaining - progress)
