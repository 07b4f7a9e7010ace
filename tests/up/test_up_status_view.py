"""`agentc status`'s terminal view: the console's address is printed whole on an 80-column
terminal (it was the table's title, which Rich wraps to the table's own narrow width)."""

from __future__ import annotations

from rich.console import Console

from agentc.up import status

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
