"""``[pinned]``: the loop refuses to start when a harness it uses prints another version inside
a launch than the one this host was qualified with; pins of harnesses it does not use cost
nothing."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import make_claude_loop_kit

WRONG = "0.0.1-not-this-one"


def test_a_harness_that_is_not_the_pinned_release_stops_the_loop_before_a_claim(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_claude_loop_kit(
        short_tmp,
        server,
        admin,
        pinned={"claude": WRONG},
    )
    agent = loop.run["harness"]
    loop.write_config(harness="claude")
    task = loop.task()
    refused = loop.once()
    assert refused.returncode == 1, refused.stderr  # the supervisor's refusal status
    assert "Traceback" not in refused.stderr
    assert "pinned: harness claude --version printed" in refused.stderr, refused.stderr
    assert f"not the pinned '{WRONG}'" in refused.stderr
    assert loop.show(task["id"])["work_status"] == "ready"  # nothing was claimed

    # The loop's own harness is the command: agent: the claude pin is not checked.
    loop.write_config(harness=agent)
    ran = loop.once()
    assert ran.returncode == 0, ran.stderr
    assert loop.show(task["id"])["work_status"] == "waiting_review", loop.tails()
