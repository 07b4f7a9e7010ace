"""The loop end to end in personal mode: a real coordinator, real git, real bwrap, and a
``command:`` agent that edits, commits and submits through the agent CLI inside its launch."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import SUBMITTING_AGENT, make_loop_kit


def test_a_ready_task_is_claimed_launched_and_submitted(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr
    shown = loop.show(task["id"])
    assert shown["work_status"] == "waiting_review", shown
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert beat["iteration"] == 1 and "Launched" in beat["outcome"] and "launch" not in beat
    [final] = loop.records("finished")
    assert final["task"] == task["id"] and final["pid"] and final["released"] is True
    assert final["outcome"] == "left as it is (submitted)"
    assert loop.records() == [] and loop.leftovers() == []
