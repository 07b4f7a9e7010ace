"""Derived task status, whether a task is on offer, and the order in which ready work is
offered. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from agentc.core.lease import is_live
from agentc.core.model import (
    BACKOFF_BASE_MS,
    BACKOFF_CAP_MS,
    PARK_AFTER_DEFAULT,
    AttemptState,
    Lifecycle,
    Phase,
    WorkStatus,
)

OFFERABLE = (WorkStatus.READY, WorkStatus.RECOVERY_REQUIRED)


@dataclass(frozen=True)
class AttemptFacts:
    state: str
    expires_at: int
    # When the owner lost the lease before it expired: the first set of its session's close,
    # its credential's revocation and its principal's disabling (None: all of them live).
    owner_lost_at: int | None = None

    @property
    def owner_authorized(self) -> bool:
        return self.owner_lost_at is None


@dataclass(frozen=True)
class TaskFacts:
    lifecycle: str
    phase: str | None
    blocked_reason: str | None
    current_attempt: AttemptFacts | None
    prerequisites_done: bool
    held: bool = False  # planned and waiting for a person to approve it (an agent filed it)
    # Implementer attempts claimed since the last submission or a person's put-back (the
    # current one included), and the project's limit of fruitless ones in a row (0: the rule
    # is off, nothing backs off or parks).
    tries: int = 0
    park_after: int = PARK_AFTER_DEFAULT
    ready_since: int = 0


def attempt_holds(attempt: AttemptFacts, now_ms: int) -> bool:
    return (
        attempt.state == AttemptState.ACTIVE
        and is_live(now_ms, attempt.expires_at)
        and attempt.owner_authorized
    )


def _held_by_attempt(task: TaskFacts, now_ms: int) -> bool:
    attempt = task.current_attempt
    return attempt is not None and attempt_holds(attempt, now_ms)


def fruitless_attempts(task: TaskFacts, now_ms: int) -> int:
    """Attempts in a row that ended without a submission (a lapsed one included; the one that
    still holds the task is not counted)."""
    return max(0, task.tries - (1 if _held_by_attempt(task, now_ms) else 0))


def parked(task: TaskFacts, now_ms: int) -> bool:
    """Whether the task's fruitless attempts reached the project's limit: it is offered no
    more until a person puts it back."""
    return (
        task.lifecycle == Lifecycle.OPEN
        and task.park_after > 0
        and fruitless_attempts(task, now_ms) >= task.park_after
    )


def work_status(task: TaskFacts, now_ms: int) -> WorkStatus:
    """First match wins, as the work model defines it."""
    if task.lifecycle != Lifecycle.OPEN:
        if task.lifecycle == Lifecycle.PLANNED and task.held:
            return WorkStatus.PROPOSED
        return WorkStatus(task.lifecycle)
    attempt = task.current_attempt
    if attempt is not None and attempt.state == AttemptState.ACTIVE:
        if attempt_holds(attempt, now_ms):
            return WorkStatus.IN_PROGRESS
        return WorkStatus.BLOCKED if parked(task, now_ms) else WorkStatus.RECOVERY_REQUIRED
    if task.phase == Phase.REVIEW:
        return WorkStatus.WAITING_REVIEW
    if task.phase == Phase.INTEGRATION:
        return WorkStatus.WAITING_INTEGRATION
    if task.blocked_reason or not task.prerequisites_done or parked(task, now_ms):
        return WorkStatus.BLOCKED
    return WorkStatus.READY


def backoff_ms(fruitless: int) -> int:
    """How long a task waits before it is offered again after its ``fruitless``-th attempt in
    a row ended without a submission: BACKOFF_BASE_MS, doubling, at most BACKOFF_CAP_MS."""
    if fruitless <= 0:
        return 0
    return min(BACKOFF_CAP_MS, BACKOFF_BASE_MS << min(fruitless - 1, 32))


def backoff_steps() -> list[tuple[int, int]]:
    """``backoff_ms`` as a table, (fruitless, delay) up to the first capped one (which every
    later count keeps): what the offer scan's SQL spells out."""
    steps = [(0, 0)]
    while steps[-1][1] < BACKOFF_CAP_MS:
        n = steps[-1][0] + 1
        steps.append((n, backoff_ms(n)))
    return steps


def offered_from(task: TaskFacts) -> int:
    """When a task that holds no attempt may be offered again: the moment its last attempt
    stopped (a lapsed one: when its owner lost it, else when it expired; a released one: when
    the task became ready) plus the backoff of its fruitless attempts (none when the project
    turned the rule off)."""
    attempt = task.current_attempt
    if attempt is not None and attempt.state == AttemptState.ACTIVE:
        stopped = attempt.owner_lost_at if attempt.owner_lost_at is not None else attempt.expires_at
    else:
        stopped = task.ready_since
    return stopped + (backoff_ms(task.tries) if task.park_after > 0 else 0)


def backing_off(task: TaskFacts, now_ms: int) -> bool:
    """Whether the task would be on offer but for the backoff of its fruitless attempts."""
    return work_status(task, now_ms) in OFFERABLE and offered_from(task) > now_ms


def is_offered(task: TaskFacts, now_ms: int) -> bool:
    """Whether `next` and claims may hand the task out now: ready or recoverable, and past the
    backoff of its fruitless attempts."""
    return work_status(task, now_ms) in OFFERABLE and offered_from(task) <= now_ms


def offer_key(priority: int, ready_since: int, task_id: str) -> tuple[int, int, str]:
    """Ready work is offered by priority (0 urgent first), then oldest ready, then id."""
    return (priority, ready_since, task_id)
