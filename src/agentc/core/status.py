"""Derived task status and the order in which ready work is offered. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from agentc.core.lease import is_live
from agentc.core.model import AttemptState, Lifecycle, Phase, WorkStatus


@dataclass(frozen=True)
class AttemptFacts:
    state: str
    expires_at: int
    owner_authorized: bool  # principal enabled, credential unrevoked, session open


@dataclass(frozen=True)
class TaskFacts:
    lifecycle: str
    phase: str | None
    blocked_reason: str | None
    current_attempt: AttemptFacts | None
    prerequisites_done: bool


def attempt_holds(attempt: AttemptFacts, now_ms: int) -> bool:
    return (
        attempt.state == AttemptState.ACTIVE
        and is_live(now_ms, attempt.expires_at)
        and attempt.owner_authorized
    )


def work_status(task: TaskFacts, now_ms: int) -> WorkStatus:
    """First match wins, as the work model defines it."""
    if task.lifecycle != Lifecycle.OPEN:
        return WorkStatus(task.lifecycle)
    attempt = task.current_attempt
    if attempt is not None and attempt.state == AttemptState.ACTIVE:
        return (
            WorkStatus.IN_PROGRESS
            if attempt_holds(attempt, now_ms)
            else (WorkStatus.RECOVERY_REQUIRED)
        )
    if task.phase == Phase.REVIEW:
        return WorkStatus.WAITING_REVIEW
    if task.phase == Phase.INTEGRATION:
        return WorkStatus.WAITING_INTEGRATION
    if task.blocked_reason or not task.prerequisites_done:
        return WorkStatus.BLOCKED
    return WorkStatus.READY


def offer_key(priority: int, ready_since: int, task_id: str) -> tuple[int, int, str]:
    """Ready work is offered by priority (0 urgent first), then oldest ready, then id."""
    return (priority, ready_since, task_id)
