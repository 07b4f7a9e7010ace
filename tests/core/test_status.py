from __future__ import annotations

from agentc.core.model import BACKOFF_CAP_MS, WorkStatus
from agentc.core.status import (
    AttemptFacts,
    TaskFacts,
    backing_off,
    backoff_ms,
    backoff_steps,
    fruitless_attempts,
    is_offered,
    offer_key,
    offered_from,
    parked,
    work_status,
)

NOW = 10_000


def facts(**kw: object) -> TaskFacts:
    base: dict[str, object] = {
        "lifecycle": "open",
        "phase": None,
        "blocked_reason": None,
        "current_attempt": None,
        "prerequisites_done": True,
    }
    base.update(kw)
    return TaskFacts(**base)  # type: ignore[arg-type]


def test_first_match_wins() -> None:
    assert work_status(facts(), NOW) == WorkStatus.READY
    assert work_status(facts(lifecycle="planned"), NOW) == WorkStatus.PLANNED
    assert work_status(facts(lifecycle="done", blocked_reason="x"), NOW) == WorkStatus.DONE
    live = AttemptFacts("active", NOW + 1)
    assert work_status(facts(current_attempt=live), NOW) == WorkStatus.IN_PROGRESS
    lapsed = AttemptFacts("active", NOW)  # equality is expired
    assert work_status(facts(current_attempt=lapsed), NOW) == WorkStatus.RECOVERY_REQUIRED
    revoked = AttemptFacts("active", NOW + 100, owner_lost_at=NOW - 5)
    assert work_status(facts(current_attempt=revoked), NOW) == WorkStatus.RECOVERY_REQUIRED
    assert work_status(facts(phase="review"), NOW) == WorkStatus.WAITING_REVIEW
    assert work_status(facts(phase="integration"), NOW) == WorkStatus.WAITING_INTEGRATION
    assert work_status(facts(phase="revision_needed"), NOW) == WorkStatus.READY
    assert work_status(facts(blocked_reason="waiting on a human"), NOW) == WorkStatus.BLOCKED
    assert work_status(facts(prerequisites_done=False), NOW) == WorkStatus.BLOCKED


def test_offer_order_is_priority_then_age_then_id() -> None:
    tasks = [(2, 5, "b"), (0, 9, "z"), (2, 5, "a"), (1, 1, "q"), (2, 1, "c")]
    ordered = sorted(tasks, key=lambda t: offer_key(*t))
    assert ordered == [(0, 9, "z"), (1, 1, "q"), (2, 1, "c"), (2, 5, "a"), (2, 5, "b")]


def test_a_held_planned_task_is_proposed() -> None:
    assert work_status(facts(lifecycle="planned", held=True), NOW) == WorkStatus.PROPOSED
    assert work_status(facts(lifecycle="canceled", held=True), NOW) == WorkStatus.CANCELED


def test_fruitless_attempts_park_the_task_at_the_limit() -> None:
    live = AttemptFacts("active", NOW + 1)
    lapsed = AttemptFacts("active", NOW)
    # The attempt that holds the task is its last try, not a fruitless one.
    running = facts(current_attempt=live, tries=3, park_after=3)
    assert (fruitless_attempts(running, NOW), parked(running, NOW)) == (2, False)
    assert work_status(running, NOW) == WorkStatus.IN_PROGRESS
    released = facts(tries=3, park_after=3)
    assert (fruitless_attempts(released, NOW), parked(released, NOW)) == (3, True)
    assert work_status(released, NOW) == WorkStatus.BLOCKED
    gone = facts(current_attempt=lapsed, tries=3, park_after=3)
    assert work_status(gone, NOW) == WorkStatus.BLOCKED  # not recovery_required
    assert work_status(facts(current_attempt=lapsed, tries=2, park_after=3), NOW) == (
        WorkStatus.RECOVERY_REQUIRED
    )
    assert not parked(facts(lifecycle="done", tries=9, park_after=1), NOW)


def test_a_task_is_offered_after_the_backoff_of_its_tries() -> None:
    ready = facts(tries=2, ready_since=NOW - 1000)
    assert offered_from(ready) == NOW - 1000 + backoff_ms(2)
    assert not is_offered(ready, NOW)
    assert is_offered(ready, offered_from(ready))
    assert is_offered(facts(ready_since=NOW), NOW)  # no try yet: at once
    # A lapsed lease counts from its expiry, or from when its owner lost it.
    expired = facts(current_attempt=AttemptFacts("active", NOW - 10), tries=1)
    assert offered_from(expired) == NOW - 10 + backoff_ms(1)
    closed = facts(current_attempt=AttemptFacts("active", NOW + 500, NOW - 20), tries=1)
    assert offered_from(closed) == NOW - 20 + backoff_ms(1)
    assert not is_offered(facts(tries=3, park_after=3, ready_since=0), NOW + 10**9)
    assert not is_offered(facts(lifecycle="planned", held=True), NOW)


def test_the_backoff_table_is_the_function() -> None:
    steps = backoff_steps()
    assert steps[0] == (0, 0) and steps[-1][1] == BACKOFF_CAP_MS
    assert all(backoff_ms(n) == ms for n, ms in steps)
    assert all(backoff_ms(n) == BACKOFF_CAP_MS for n in range(steps[-1][0], 200))
    assert all(a[1] < b[1] for a, b in zip(steps, steps[1:], strict=False))


def test_a_limit_of_0_neither_delays_nor_parks() -> None:
    off = facts(tries=50, park_after=0, ready_since=NOW)
    assert not parked(off, NOW) and work_status(off, NOW) == WorkStatus.READY
    assert offered_from(off) == NOW and is_offered(off, NOW) and not backing_off(off, NOW)
    assert backing_off(facts(tries=1, ready_since=NOW), NOW)
