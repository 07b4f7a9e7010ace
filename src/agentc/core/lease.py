"""Lease arithmetic. Times are integer milliseconds since the epoch."""

from __future__ import annotations

from dataclasses import dataclass

from agentc.core.errors import CoordinatorError

RENEW_CADENCE_CAP_SECONDS = 60


def renew_after_seconds(remaining_ms: int) -> int:
    """How long a holder may wait before renewing: a third of what is left, at most 60 s."""
    return max(0, min(remaining_ms // 3000, RENEW_CADENCE_CAP_SECONDS))


def is_live(now_ms: int, expires_at_ms: int) -> bool:
    """A lease holds only while now is strictly before its expiry (equality is expired)."""
    return now_ms < expires_at_ms


def attempt_cap(created_ms: int, max_attempt_seconds: int) -> int | None:
    return created_ms + max_attempt_seconds * 1000 if max_attempt_seconds > 0 else None


def renewed_expiry(
    now_ms: int, lease_seconds: int, created_ms: int, max_attempt_seconds: int
) -> int:
    expires = now_ms + lease_seconds * 1000
    cap = attempt_cap(created_ms, max_attempt_seconds)
    return expires if cap is None else min(expires, cap)


@dataclass(frozen=True)
class Renewal:
    expires_at: int
    remaining_ms: int
    renew_after_seconds: int


def renew(
    now_ms: int, expires_at_ms: int, lease_seconds: int, created_ms: int, max_attempt_seconds: int
) -> Renewal:
    """Extend a live lease; refuse an expired one or one already at its duration cap."""
    if not is_live(now_ms, expires_at_ms):
        raise CoordinatorError("lease_expired", "the attempt's lease has expired", status=409)
    cap = attempt_cap(created_ms, max_attempt_seconds)
    if cap is not None and expires_at_ms >= cap:
        raise CoordinatorError(
            "attempt_duration_exceeded",
            "the attempt reached max_attempt_seconds; checkpoint, release and continue in a "
            "new attempt",
            status=409,
        )
    new_expiry = renewed_expiry(now_ms, lease_seconds, created_ms, max_attempt_seconds)
    # A renewal never shortens a lease it does not have to.
    new_expiry = max(new_expiry, expires_at_ms)
    remaining = new_expiry - now_ms
    return Renewal(new_expiry, remaining, renew_after_seconds(remaining))
