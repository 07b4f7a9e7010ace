"""What ``agentc up`` shows while it runs and ``agentc status`` prints: tasks by work status,
the processes, the running launches and what the model calls cost.

Read over HTTP with the read-only ``status`` credential, the supervisor loop's heartbeat and
the gateway's ledger (``<state>/gateway/ledger.jsonl``, absent when no model was called).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import httpx
from rich.console import Group
from rich.table import Table
from rich.text import Text

from agentc.client import reads
from agentc.client.project import ProjectApi
from agentc.client.transport import TIMEOUT, Transport
from agentc.core.model import WorkStatus
from agentc.files import load_toml
from agentc.up.layout import Layout


def task_counts(
    origin: str, layout: Layout, project_id: str, timeout: httpx.Timeout = TIMEOUT
) -> dict[str, int]:
    """Every work status with its number of tasks (zeros included)."""
    token = status_token(layout)
    counts = {status.value: 0 for status in WorkStatus}
    with Transport(origin, token, timeout=timeout) as client:
        for task in reads.tasks(ProjectApi(client, project_id).get):
            counts[task["work_status"]] = counts.get(task["work_status"], 0) + 1
    return counts


def status_token(layout: Layout) -> str:
    """The read-only credential's token (whatever origin the file names: ``status`` may ask a
    coordinator it started on another port)."""
    data = load_toml(layout.credential("status"), what="credentials file")
    token = data["credentials"][0]["token"]
    return str(token)


def launches(layout: Layout, now_ms: int | None = None) -> list[dict[str, Any]]:
    """The launches the supervisor loop reports running in its heartbeat (none when it is
    idle), each with how long it has run (``elapsed_seconds``) and what its model calls cost so
    far by the gateway's ledger (``spend_usd``)."""
    try:
        beat = json.loads((layout.supervisor_state / "loop/heartbeat.json").read_text())
    except (OSError, ValueError):
        return []
    running = beat.get("launches") if isinstance(beat, dict) else None
    if not isinstance(running, list):
        return []
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    by_launch = ledger_costs(layout)[1]
    shown = []
    for launch in running:
        if not isinstance(launch, dict):
            continue
        started = launch.get("started_ms")
        elapsed = max(0, now - started) // 1000 if isinstance(started, int) else None
        spend = by_launch.get(str(launch.get("launch")), 0.0)
        shown.append({**launch, "elapsed_seconds": elapsed, "spend_usd": round(spend, 6)})
    return shown


def ledger_costs(layout: Layout) -> tuple[float, dict[str, float]]:
    """The model calls' cost so far from the gateway's ledger: in all, and per launch."""
    total = 0.0
    by_launch: dict[str, float] = {}
    try:
        with (layout.root / "gateway/ledger.jsonl").open() as ledger:
            for line in ledger:
                try:
                    row = json.loads(line)
                    usd = row.get("usd")
                except (ValueError, AttributeError):
                    continue
                if isinstance(usd, int | float):
                    total += float(usd)
                    session = str(row.get("session"))
                    by_launch[session] = by_launch.get(session, 0.0) + float(usd)
    except OSError:
        pass
    return total, by_launch


def cost_usd(layout: Layout) -> float:
    """The model calls' cost so far, from the gateway's ledger."""
    return round(ledger_costs(layout)[0], 6)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def snapshot(
    origin: str,
    layout: Layout,
    record: dict[str, Any],
    processes: dict[str, int | None],
    timeout: httpx.Timeout = TIMEOUT,
) -> dict[str, Any]:
    """The status object (``agentc status --json``); ``timeout`` bounds each request."""
    return {
        "project_id": record["project_id"],
        "console": f"{record.get('console') or origin}/console",
        "tasks": task_counts(origin, layout, record["project_id"], timeout),
        "processes": {
            name: {"pid": pid, "running": pid is not None and alive(pid)}
            for name, pid in processes.items()
        },
        "launches": launches(layout),
        "cost_usd": cost_usd(layout),
    }


def _launch_line(launch: dict[str, Any]) -> str:
    """A running launch in the table: its task (short), how long it has run, its spend."""
    task = str(launch.get("task", ""))[:8]
    elapsed = launch.get("elapsed_seconds")
    ran = f"{elapsed // 60}m{elapsed % 60:02d}s" if isinstance(elapsed, int) else "?"
    return f"{task} {ran} ${float(launch.get('spend_usd') or 0):.2f}"


def table(status: dict[str, Any]) -> Group:
    """The terminal view of a snapshot: the console's address on a line of its own (whole on an
    80-column terminal; folded, never cut, on a narrower one), then the table."""
    address = Text(f"agentc: {status['console']}", overflow="fold")
    view = Table(show_header=True, expand=False)
    view.add_column("tasks")
    view.add_column("", justify="right")
    for name, count in status["tasks"].items():
        if count:
            view.add_row(name.replace("_", " "), str(count))
    for name, proc in status["processes"].items():
        view.add_row(f"[dim]{name}[/dim]", "running" if proc["running"] else "[red]stopped[/red]")
    for launch in status["launches"]:
        view.add_row(f"launch ({launch.get('role')})", _launch_line(launch))
    view.add_row("model cost", f"${status['cost_usd']:.2f}")
    return Group(address, view)
