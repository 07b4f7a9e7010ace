"""Human output: Rich tables for what the commands return (`--json` bypasses all of this)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

Renderer = Callable[[Console, Any], None]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def kv(
    console: Console, data: Any, title: str | None = None, keys: Iterable[str] | None = None
) -> None:
    """A two-column table of a mapping (only `keys`, when given)."""
    if not isinstance(data, dict):
        console.print(_cell(data))
        return
    table = Table(show_header=False, title=title, title_justify="left", box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key in keys if keys is not None else data:
        if key in data:
            table.add_row(key, _cell(data[key]))
    console.print(table)


def rows(console: Console, items: list[dict[str, Any]], columns: list[str], title: str) -> None:
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    for item in items:
        table.add_row(*(_cell(item.get(c)) for c in columns))
    console.print(table)


TASK_KEYS = ["id", "title", "kind", "priority", "work_status", "lifecycle", "revision",
             "generation", "current_attempt_id", "current_submission_id", "phase",
             "blocked_reason", "depends_on"]  # fmt: skip
ATTEMPT_KEYS = ["id", "task_id", "generation", "state", "mode", "expires_at",
                "lease_remaining_ms", "handoff"]  # fmt: skip


def generic(console: Console, data: Any) -> None:
    kv(console, data)


def next_action(console: Console, data: Any) -> None:
    action = data.get("action")
    if action is None:
        console.print(f"Nothing to do now; ask again in {data.get('retry_after_seconds')} s.")
        return
    kv(console, {k: v for k, v in action.items() if k != "call"}, title=f"next ({data['role']})")


def task_list(console: Console, data: Any) -> None:
    cols = ["id", "priority", "work_status", "kind", "revision", "title"]
    rows(console, data.get("items", []), cols, "tasks")
    if data.get("next_cursor"):
        console.print(f"more: --cursor {data['next_cursor']}")


def task(console: Console, data: Any) -> None:
    kv(console, data, title="task", keys=TASK_KEYS)
    for i, criterion in enumerate(data.get("acceptance_criteria", []), 1):
        console.print(f"  criterion {i}: {criterion}")
    if data.get("attempts"):
        cols = ["id", "generation", "state", "mode", "session_id", "expires_at"]
        rows(console, data["attempts"], cols, "attempts")


def created_task(console: Console, data: Any) -> None:
    task(console, data.get("task", data))


def claim(console: Console, data: Any) -> None:
    got = data.get("claim")
    if got is None:
        console.print("No claim: " + "; ".join(data.get("reasons", [])))
        return
    kv(console, got["task"], title="task", keys=["id", "title", "kind", "revision"])
    kv(console, got["attempt"], title="attempt", keys=ATTEMPT_KEYS)
    console.print(f"renew after {data.get('renew_after_seconds')} s")


def attempt(console: Console, data: Any) -> None:
    kv(console, data.get("attempt", {}), title="attempt", keys=ATTEMPT_KEYS)
    extra = {k: v for k, v in data.items() if k not in ("attempt",)}
    if extra:
        kv(console, extra)


def submission(console: Console, data: Any) -> None:
    sub = data.get("submission", {})
    kv(console, sub, title="submission",
       keys=["id", "task_id", "kind", "summary", "candidate_ref", "candidate_revision",
             "base_revision"])  # fmt: skip
    if data.get("activities"):
        rows(console, data["activities"], ["id", "kind", "state"], "workflow activities")
    if data.get("task"):
        console.print(f"task {data['task']['id']} is now {data['task']['work_status']}")


def review_claim(console: Console, data: Any) -> None:
    if data.get("activity") is None:
        console.print("No review claimed: " + "; ".join(data.get("reasons", [])))
        return
    kv(console, data["activity"], title="review", keys=["id", "kind", "state", "submission_id"])
    kv(console, data["attempt"], title="attempt", keys=ATTEMPT_KEYS)
    sub = data["submission"]
    kv(console, sub, title="submission",
       keys=["id", "summary", "acceptance_evidence", "candidate_ref", "candidate_revision",
             "base_revision"])  # fmt: skip


def decision(console: Console, data: Any) -> None:
    review = data.get("review") or data.get("decision") or {}
    kv(console, review, title="decision", keys=["id", "decision", "summary", "findings"])
    if data.get("task"):
        console.print(f"task {data['task']['id']} is now {data['task']['work_status']}")


HELD_KEYS = ["attempt_id", "task_id", "activity_id", "generation", "expires_at"]


def session(console: Console, data: Any) -> None:
    kv(console, {k: v for k, v in data.items() if k not in ("held_attempts", "local_attempt")},
       title="session")  # fmt: skip
    held = data.get("held_attempts") or []
    for item in held:
        kv(console, item, title="held attempt", keys=["project_id", *HELD_KEYS])
    if not held:
        console.print("This session holds no attempt.")


def status(console: Console, data: Any) -> None:
    kv(console, {k: v for k, v in data.items() if k not in ("attempt", "review", "worktrees")},
       title="session")  # fmt: skip
    if data.get("attempt"):
        kv(console, data["attempt"], title="held attempt")
    if data.get("review"):
        kv(console, data["review"], title="held review")
    for aid, wt in data.get("worktrees", {}).items():
        kv(console, wt, title=f"worktree of {aid}")
