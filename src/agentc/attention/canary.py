"""``agentc-attention canary --harness NAME``: the end-to-end canary of one host and harness.

Files one trivial task (create ``canary/<run>.md`` holding one line) in the canary project at
``[canary] priority`` (0, urgent, so a shared project's backlog does not delay it) with the
``canary`` admission class, waits until it is done (``timeout_minutes``), and records host, harness,
outcome (``ok``, ``failed``, ``timeout``), duration, task id and the harness the cost ledgers
say served it (a fallback vendor never passes for the primary). Each result is a line of
``<state_dir>/canary-results.jsonl`` (the source); the rows the coordinator accepted are listed in
``canary-reported.json`` and every run resends the rest (``POST .../telemetry/canary-results``;
the coordinator also keeps a row once however often it arrives), so each is reported exactly
once; a failed report never changes the exit status. A failure or timeout pages
(``canary:<harness>``, once, with a recovery note after the next pass) like
``agentc-attention check``.

Exit status: 0 passed, 1 failed or timed out, 2 a page could not be delivered or the run could
not work at all.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agentc.attention import paging, state
from agentc.attention.checks import Observation
from agentc.attention.config import AttentionConfig
from agentc.attention.paging import read_secret
from agentc.attention.watch import FAILING, HEALTHY, UNDELIVERED, settle
from agentc.client.project import project_path
from agentc.client.transport import Transport
from agentc.core.errors import AgentcError, CoordinatorError
from agentc.core.rules import canonical_json, sha256_hex
from agentc.files import JsonLines, UnsafeFile, read_private, tail_objects, write_atomic

LEDGER_TAIL = 16 << 20
MAX_REPORTED = 1 << 20


@dataclass(frozen=True)
class Canary:
    """Where this canary runs and reports."""

    config: AttentionConfig
    harness: str
    host: str
    project_id: str
    token: str

    @property
    def results(self) -> Path:
        return self.config.state_dir / "canary-results.jsonl"

    @property
    def reported(self) -> Path:
        return self.config.state_dir / "canary-reported.json"

    @property
    def base(self) -> str:
        return project_path(self.project_id)


def of(config: AttentionConfig, harness: str) -> Canary:
    canary = config.canary
    token_file = canary.token_file or config.token_file
    return Canary(
        config,
        harness,
        canary.host or socket.gethostname(),
        canary.project_id or config.project_id,  # shared-project mode without one
        read_secret(token_file, "canary.token_file"),
    )


def served_by(ledgers: list[Path], task_id: str) -> list[str]:
    """The harnesses (or gateway upstreams) the ledgers' implementer rows of the task name."""
    found: list[str] = []
    for ledger in ledgers:
        for row in tail_objects(ledger, LEDGER_TAIL):
            if row.get("task") != task_id or row.get("role") not in (None, "impl", "implementer"):
                continue
            name = row.get("harness") or row.get("upstream")
            if isinstance(name, str) and name not in found:
                found.append(name)
    return found


def _task_body(c: Canary, run_id: str) -> dict[str, Any]:
    line = f"canary {c.host} {c.harness} {run_id}"
    path = f"canary/{run_id}.md"
    description = (
        f"End-to-end canary of host {c.host} with {c.harness}: create the file {path} holding "
        f"the one line '{line}' and change nothing else."
    )
    if c.harness.startswith("command:"):  # the bundled example agent follows a plan block
        plan = {"files": {path: line + "\n"}, "message": f"Canary {run_id}"}
        description += "\n\n```agentc-example\n" + json.dumps(plan) + "\n```"
    return {
        "title": f"canary {c.host} {c.harness} {run_id}",
        "description": description,
        "acceptance_criteria": [f"{path} holds the line '{line}'"],
        "priority": c.config.canary.priority,
        "admission_class": "canary",
    }


def run_once(
    c: Canary, now_ms: Callable[[], int], sleep: Callable[[float], None]
) -> dict[str, Any]:
    """File the task and wait for it; the result row."""
    canary = c.config.canary
    started = now_ms()
    run_id = f"{started}-{os.urandom(3).hex()}"
    row: dict[str, Any] = {
        "host": c.host,
        "harness": c.harness,
        "project_id": c.project_id,
        "at_ms": started,
        "task_id": None,
        "served_by": None,
        "canary": True,
    }
    with Transport(c.config.coordinator_origin(), c.token) as transport:
        try:
            made = transport.send(
                "POST", c.base + "/tasks", _task_body(c, run_id), key=f"canary-{run_id}"
            )
        except AgentcError as exc:
            why = f"{exc.code}: {exc.message}" if isinstance(exc, CoordinatorError) else str(exc)
            return {
                **row,
                "outcome": "failed",
                "reason": f"the task could not be created: {why}",
                "duration_seconds": 0,
            }
        task = made.data["task"]
        row["task_id"] = task["id"]
        deadline = started + int(canary.timeout_minutes * 60_000)
        status = task["work_status"]
        while status not in ("done", "canceled") and now_ms() < deadline:
            sleep(canary.poll_seconds)
            try:
                status = transport.send("GET", f"{c.base}/tasks/{quote(task['id'], safe='')}").data[
                    "work_status"
                ]
            except AgentcError:
                continue  # the coordinator may be restarting: ask again until the deadline
    row["duration_seconds"] = round((now_ms() - started) / 1000, 3)
    name = f"task {task.get('title')!r} ({task['id']}) in project {c.project_id}"
    if status == "canceled":
        return {**row, "outcome": "failed", "reason": f"{name} was canceled"}
    if status != "done":
        minutes = canary.timeout_minutes
        return {
            **row,
            "outcome": "timeout",
            "reason": f"{name} was not done within {minutes:g} minutes ({status})",
        }
    served = served_by(list(canary.ledgers), task["id"])
    row["served_by"] = served[0] if len(served) == 1 else (served or None)
    if served and served != [c.harness]:
        return {
            **row,
            "outcome": "failed",
            "reason": f"{name} was served by {', '.join(served)}, not {c.harness}",
        }
    return {**row, "outcome": "ok"}


def _reported(c: Canary) -> set[str]:
    try:
        raw = read_private(c.reported, max_bytes=MAX_REPORTED)
    except UnsafeFile as exc:
        if exc.missing:
            return set()
        raise
    try:
        data = json.loads(raw)
    except ValueError:  # damaged: everything is sent again (the coordinator keeps a row once)
        return set()
    return {str(x) for x in data} if isinstance(data, list) else set()


def report(c: Canary) -> str | None:
    """Send every result not yet accepted; a line on failure (never fatal)."""
    if not c.config.canary.report:
        return None
    done = _reported(c)
    rows: list[dict[str, Any]] = []
    kept: set[str] = set()  # the digests of the rows still in the tail: all the file keeps
    for row in tail_objects(c.results, LEDGER_TAIL):
        digest = sha256_hex(canonical_json(row))
        kept.add(digest)
        if digest not in done:
            rows.append(row)
    if not rows:
        return None
    try:
        with Transport(c.config.coordinator_origin(), c.token) as transport:
            answer = transport.send(
                "POST",
                c.base + "/telemetry/canary-results",
                {"host": c.host, "rows": rows},
                key=os.urandom(16).hex(),
            ).data
    except AgentcError as exc:
        return f"canary results not reported (kept for the next run): {exc}"
    refused = {int(r["index"]) for r in answer.get("rejected", [])}
    done |= {sha256_hex(canonical_json(r)) for i, r in enumerate(rows) if i not in refused}
    write_atomic(c.reported, json.dumps(sorted(done & kept)).encode() + b"\n", mode=0o600)
    if refused:
        return f"the coordinator refused {len(refused)} canary result(s): {answer['rejected']}"
    return None


def run(config: AttentionConfig, harness: str, now_ms: Callable[[], int]) -> int:
    c = of(config, harness)
    send = paging.senders(config)
    path = config.state_dir / "canary-state.json"
    row = run_once(c, now_ms, time.sleep)
    config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    out = JsonLines.open(c.results)
    try:
        out.write(row)
    finally:
        out.close()
    print(json.dumps(row, sort_keys=True))
    problem = report(c)
    if problem:
        print(f"agentc-attention: {problem}", file=sys.stderr)
    now = now_ms()
    st = state.load(path, now)
    seen = Observation(ran={"canary"})
    if row["outcome"] != "ok":
        seen.fail(f"canary:{harness}", f"agentc e2e canary failed on {c.host}: {row['reason']}")
    settle(st, seen, now, sorted(send), c.project_id)
    state.save(path, st)
    problems = paging.deliver(st.outbox, send)
    state.save(path, st)
    for line in problems:
        print(f"agentc-attention: {line}", file=sys.stderr)
    if st.outbox:
        return UNDELIVERED
    return HEALTHY if row["outcome"] == "ok" else FAILING
