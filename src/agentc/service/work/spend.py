"""What the hosts reported, summed for people: cost per day, per task and per host, and the
canaries' history (the console's charts and the attention digest read these).

The rows are the telemetry the hosts sent (`telemetry.py`); a row counts when it says it
happened (`occurred_at_ms`, else `at_ms`) unless that is in the future, otherwise when it
arrived. A cost row is charged to the task of the attempt it names (the attempt is checked when
the row arrives), else to the task it names if that is a task of the project.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.engine import Connection

from agentc.core.model import TelemetryStream
from agentc.core.rules import rfc3339
from agentc.service.ops import JsonObject
from agentc.store import audit, tasks
from agentc.store.leases import Attempt
from agentc.store.sql import fetch_row

DAY_MS = 24 * 3600 * 1000
WINDOW_DAYS = 30
ROWS_READ = 20_000  # per stream and window: the newest rows, enough for a month of launches
TASKS_SHOWN = 12
CANARY_PASSING = frozenset({"pass", "passed", "ok", "success"})


@dataclass(frozen=True)
class _Cost:
    host: str
    at: int
    usd: float | None
    task_id: str | None


@dataclass(frozen=True)
class _Canary:
    host: str
    at: int
    harness: str
    outcome: str

    @property
    def passing(self) -> bool:
        return self.outcome.lower() in CANARY_PASSING


def day_of(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).date().isoformat()


def window_start(now: int, days: int = WINDOW_DAYS) -> int:
    """Midnight UTC of the first day of a window of whole days ending today."""
    return (now // DAY_MS - (days - 1)) * DAY_MS


def _when(row: dict[str, object], received_at: int, now: int) -> int:
    """When the row happened: the time it gives if that is not in the future, else when it
    arrived."""
    for name in ("occurred_at_ms", "at_ms"):
        value = row.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= now:
            return value
    return received_at


def _rows(
    conn: Connection, project_id: str, stream: TelemetryStream, since: int
) -> list[tuple[audit.TelemetryRow, dict[str, object]]]:
    found = []
    for row in audit.telemetry_since(conn, project_id, stream.value, since, ROWS_READ):
        data = json.loads(row.row_json)
        if isinstance(data, dict):
            found.append((row, data))
    return found


def _costs(conn: Connection, project_id: str, since: int, now: int) -> list[_Cost]:
    attempts: dict[str, str | None] = {}

    def task_of(data: dict[str, object]) -> str | None:
        attempt_id = data.get("attempt_id")
        if isinstance(attempt_id, str):
            if attempt_id not in attempts:
                att = fetch_row(conn, Attempt, attempt_id)
                ok = att is not None and att.project_id == project_id
                attempts[attempt_id] = att.task_id if att is not None and ok else None
            if attempts[attempt_id] is not None:
                return attempts[attempt_id]
        task_id = data.get("task_id")
        return task_id if isinstance(task_id, str) else None

    found = []
    for row, data in _rows(conn, project_id, TelemetryStream.COST, since):
        usd = data.get("usd")
        dollars = float(usd) if isinstance(usd, int | float) and not isinstance(usd, bool) else None
        at = _when(data, row.received_at, now)
        if at >= since:
            found.append(_Cost(row.host, at, dollars, task_of(data)))
    return found


def _canaries(conn: Connection, project_id: str, since: int, now: int) -> list[_Canary]:
    found = []
    for row, data in _rows(conn, project_id, TelemetryStream.CANARY, since):
        at = _when(data, row.received_at, now)
        if at >= since:
            found.append(_Canary(row.host, at, str(data["harness"]), str(data["outcome"])))
    return found


def _money(value: float) -> float:
    return round(value, 4)


def cost_report(conn: Connection, project_id: str, now: int) -> JsonObject:
    """Cost per day (every day of the window), per task (the costliest) and per host."""
    since = window_start(now)
    rows = _costs(conn, project_id, since, now)
    days = {day_of(since + n * DAY_MS): [0.0, 0] for n in range(WINDOW_DAYS)}
    by_task: dict[str | None, list[float]] = defaultdict(lambda: [0.0, 0])
    by_host: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    nowhere = [0.0, 0]  # a row stamped after now (a clock stepped back) joins no day
    for row in rows:
        day = days.get(day_of(row.at), nowhere)
        for bucket in (day, by_task[row.task_id], by_host[row.host]):
            bucket[0] += row.usd or 0.0
            bucket[1] += 1
    costliest = sorted(by_task.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0] or ""))
    return {
        "since": rfc3339(since),
        "window_days": WINDOW_DAYS,
        "rows": len(rows),
        "unpriced_rows": sum(1 for r in rows if r.usd is None),
        "total_usd": _money(sum(r.usd or 0.0 for r in rows)),
        "by_day": [{"day": d, "usd": _money(v[0]), "rows": int(v[1])} for d, v in days.items()],
        "by_task": [
            {**_task_label(conn, project_id, task_id), "usd": _money(v[0]), "rows": int(v[1])}
            for task_id, v in costliest[:TASKS_SHOWN]
        ],
        "by_host": [
            {"host": host, "usd": _money(v[0]), "rows": int(v[1])}
            for host, v in sorted(by_host.items(), key=lambda kv: (-kv[1][0], kv[0]))
        ],
    }


def _task_label(conn: Connection, project_id: str, task_id: str | None) -> JsonObject:
    if task_id is None:
        return {"task_id": None, "title": "(no task named)"}
    task = tasks.get_project_task(conn, project_id, task_id)
    return {"task_id": task_id, "title": task.title if task else "(not a task of this project)"}


def canary_report(conn: Connection, project_id: str, now: int) -> JsonObject:
    """Canary results per day (passed, failed), per host and harness over the window, and the
    latest result per host and harness."""
    since = window_start(now)
    rows = _canaries(conn, project_id, since, now)
    days = {day_of(since + n * DAY_MS): [0, 0] for n in range(WINDOW_DAYS)}
    latest: dict[tuple[str, str], _Canary] = {}
    runs: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        days.get(day_of(row.at), [0, 0])[0 if row.passing else 1] += 1
        key = (row.host, row.harness)
        runs[key][0 if row.passing else 1] += 1
        if key not in latest or row.at > latest[key].at:
            latest[key] = row
    return {
        "since": rfc3339(since),
        "window_days": WINDOW_DAYS,
        "rows": len(rows),
        "by_day": [{"day": d, "passed": v[0], "failed": v[1]} for d, v in days.items()],
        "by_host_harness": [
            {"host": k[0], "harness": k[1], "passed": v[0], "failed": v[1]}
            for k, v in sorted(runs.items())
        ],
        "latest": [
            {
                "host": r.host,
                "harness": r.harness,
                "outcome": r.outcome,
                "passing": r.passing,
                "at": rfc3339(r.at),
            }
            for _key, r in sorted(latest.items())
        ],
    }


def spend_since(conn: Connection, project_id: str, since: int, now: int) -> JsonObject:
    """The dollars the hosts reported since the given time (unpriced rows counted apart)."""
    rows = _costs(conn, project_id, since, now)
    return {
        "usd": _money(sum(r.usd or 0.0 for r in rows)),
        "rows": len(rows),
        "unpriced_rows": sum(1 for r in rows if r.usd is None),
    }
