"""The whole-system soak, short (tests/up/soak.py; bench/soak.py runs it for longer): ``agentc
up --harness claude`` with the scripted provider for at least 15 simulated hours (a tick of half
a second is ten simulated minutes), the supervisor killed mid-launch, the coordinator killed
and restarted, a 429 burst, a red check on the target and the digest left unread: each paged
exactly once and noted recovered exactly once, nothing else paged, every task landed, no launch
left, and the launch whose loop died recorded by the loop that settled it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.up.kit import processes_of
from tests.up.soak import Pace, Soak, problems

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_left_alone_with_faults_it_pages_each_once_and_lands_every_task(tmp_path: Path) -> None:
    summary = Soak(tmp_path, Pace(tick=0.5, hours=15, extra=0, burst=6)).run()
    print(f"soak: {summary}")
    found = problems(summary)
    assert found == [], (found, summary)
    assert summary["held_run"] is not None and summary["held_run"]["ending"] == "submitted"
    assert str(summary["held_run"]["why"]).endswith(
        "its launch ended while no supervisor watched it (crash or restart)"
    )
    left = [p for p in processes_of(os.geteuid()) if str(tmp_path) in p]
    assert left == [], left
