"""Quiet hours (``[health] quiet_hours``) with the live loop: outside the window nothing new is
claimed and the heartbeat says why; inside it the loop claims; a kill switch set by anything
else holds the host whatever the window (quiet hours never touch the switch)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import httpx

from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import SUBMITTING_AGENT, make_loop_kit


def _window(start_hours: int, end_hours: int) -> str:
    """A window relative to the local time now (whole hours away from now, so the minute the
    test takes cannot cross an edge)."""
    now = datetime.now()
    start, end = now + timedelta(hours=start_hours), now + timedelta(hours=end_hours)
    return f"{start:%H}:00-{end:%H}:00"


def test_outside_quiet_hours_nothing_is_claimed_and_an_owner_s_switch_stays(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    closed = _window(2, 4)
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT, health={"quiet_hours": closed})
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert f"outside quiet hours ({closed} local time)" in result.stderr
    assert loop.show(task["id"])["work_status"] == "ready"
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert list(beat["holds"]) == ["quiet_hours"] and isinstance(beat["at_ms"], int)

    switch = loop.state / "kill-switch"
    switch.write_text("owner\n")
    loop.top["health"] = {"quiet_hours": _window(-1, 2)}  # open now
    loop.write_config()
    held = loop.once()
    assert "the kill switch is set" in held.stderr and "quiet hours" not in held.stderr
    assert switch.read_text() == "owner\n"
    assert loop.show(task["id"])["work_status"] == "ready"

    switch.unlink()
    claimed = loop.once()
    assert claimed.returncode == 0, claimed.stderr
    assert loop.show(task["id"])["work_status"] != "ready", claimed.stderr
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert beat["holds"] == {}


def test_a_window_that_is_not_one_is_refused(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(
        short_tmp, server, admin, SUBMITTING_AGENT, health={"quiet_hours": "22:00-22:00"}
    )
    result = loop.once()
    assert result.returncode != 0
    assert "health.quiet_hours:" in result.stderr and "is empty" in result.stderr
    assert "Traceback" not in result.stderr
