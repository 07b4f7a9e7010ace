from __future__ import annotations

from agentc.core.model import WorkStatus
from agentc.core.status import AttemptFacts, TaskFacts, offer_key, work_status

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
    live = AttemptFacts("active", NOW + 1, True)
    assert work_status(facts(current_attempt=live), NOW) == WorkStatus.IN_PROGRESS
    lapsed = AttemptFacts("active", NOW, True)  # equality is expired
    assert work_status(facts(current_attempt=lapsed), NOW) == WorkStatus.RECOVERY_REQUIRED
    revoked = AttemptFacts("active", NOW + 100, False)
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
