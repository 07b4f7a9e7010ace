"""`agentc status`'s terminal view: the console's address is printed whole on an 80-column
terminal (it was the table's title, which Rich wraps to the table's own narrow width); each
running launch with its task, role, elapsed time and spend."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from agentc.up import status
from agentc.up.layout import Layout

URL = "http://agentc-f90c13c528532135ef316f9154a6cc2e.localhost:8080/console"


def _snapshot() -> dict[str, object]:
    return {
        "console": URL,
        "tasks": {"done": 3, "ready": 0},
        "processes": {"coordinator": {"pid": 1, "running": True}},
        "launches": [],
        "cost_usd": 0.0,
    }


def test_the_console_address_is_one_unbroken_line() -> None:
    for width in (60, 80, 120):
        out = Console(width=width, record=True, color_system=None)
        out.print(status.table(_snapshot()))
        text = out.export_text()
        if width >= 80:
            assert URL in text.splitlines()[0], text
        else:  # folded over lines, not cut
            assert URL in "".join(line.strip() for line in text.splitlines()[:3]), text
        assert "done" in text and "coordinator" in text and "$0.00" in text
        assert "ready" not in text  # a count of zero is left out


def test_each_running_launch_shows_its_task_role_elapsed_time_and_spend(tmp_path: Path) -> None:
    """From the loop's heartbeat (the running launches) and the gateway's ledger (each launch's
    model calls): what `agentc status` shows of each launch."""
    layout = Layout(tmp_path)
    beat = layout.supervisor_state / "loop/heartbeat.json"
    beat.parent.mkdir(parents=True)
    running = [
        {"launch": "L1", "role": "implementer", "task": "t-one-long-id", "started_ms": 1_000},
        {"launch": "L2", "role": "reviewer", "task": "t-two-long-id", "started_ms": 61_000},
    ]
    beat.write_text(json.dumps({"launches": running, "launch": running[0]}))
    ledger = layout.root / "gateway/ledger.jsonl"
    ledger.parent.mkdir()
    rows = [{"session": "L1", "usd": 0.25}, {"session": "L1", "usd": 0.5}]
    rows += [{"session": "L2", "usd": 0.125}, {"session": "ended", "usd": 2.0}]
    ledger.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')
    shown = status.launches(layout, now_ms=193_000)
    assert [(x["launch"], x["role"], x["elapsed_seconds"], x["spend_usd"]) for x in shown] == [
        ("L1", "implementer", 192, 0.75),
        ("L2", "reviewer", 132, 0.125),
    ]
    assert status.cost_usd(layout) == 2.875
    out = Console(width=100, record=True, color_system=None)
    out.print(status.table({**_snapshot(), "launches": shown}))
    text = out.export_text()
    assert "launch (implementer)" in text and "t-one-lo 3m12s $0.75" in text
    assert "launch (reviewer)" in text and "t-two-lo 2m12s $0.12" in text
    # No heartbeat, or one of an idle loop: no launch.
    beat.write_text(json.dumps({"launches": []}))
    assert status.launches(layout) == []
    beat.unlink()
    assert status.launches(layout) == []
