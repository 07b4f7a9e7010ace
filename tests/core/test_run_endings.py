"""A run's endings have one home (core.model.RunEnding): the steps record takes exactly them,
the console has words for each, and the loop's rule names only them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentc.core.model import RUN_ENDINGS


def test_every_ending_is_taken_shown_and_nothing_else() -> None:
    from agentc.service.console.render import ENDING_WORDS
    from agentc.service.work.steps import StepsIn

    assert RUN_ENDINGS == ("submitted", "released", "killed", "limit_hit")
    assert tuple(ENDING_WORDS) == RUN_ENDINGS
    for ending in RUN_ENDINGS:
        assert StepsIn.model_validate({"harness": "claude", "ending": ending}).ending == ending
    with pytest.raises(ValidationError):
        StepsIn.model_validate({"harness": "claude", "ending": "crashed"})


@pytest.mark.parametrize(
    ("state", "stopped", "at_limit", "rate_limited", "gateway"),
    [
        ("submitted", None, False, False, None),
        ("active", None, False, True, None),
        ("active", None, False, False, "launch cap"),
        ("active", "drain", False, False, None),
        ("active", "time limit", True, False, None),
        ("released", None, False, False, None),
        ("expired", None, False, False, None),
        (None, None, False, False, None),
    ],
)
def test_the_loop_names_only_these_endings(
    state: str | None, stopped: str | None, at_limit: bool, rate_limited: bool, gateway: str | None
) -> None:
    from agentc.supervisor.loop.steps import ending_of

    ending = ending_of(
        state,
        stopped=stopped,
        at_limit=at_limit,
        rate_limited=rate_limited,
        exited="exit 0",
        gateway_stop=gateway,
    )
    assert ending.kind in RUN_ENDINGS and ending.why
