"""The checks of ``agentc-attention check``: each looks at one thing and says what is wrong.

A check's result is a set of failing keys (``coordinator``, ``next``, ``heartbeat``, ``digest``,
``interventions``, ``neglect``, ``target:<revision>``, ``lease:<attempt>``, ``cost_cap``,
``vendor:<name>``, ``egress:<launch>``, ``backup``) with their text, plus the families that
ran: a key of a family that could not run this time (the coordinator did not answer) neither
recovers nor pages. Nothing here sends a page or writes a file (:mod:`agentc.attention.watch` does).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from agentc.attention.config import AttentionConfig
from agentc.client import reads
from agentc.client.errors import TransportFailure
from agentc.client.project import ProjectApi
from agentc.client.reads import TaskSummary
from agentc.client.transport import Transport
from agentc.core.errors import AgentcError, CoordinatorError
from agentc.core.rules import ms_of
from agentc.files import UnsafeFile, read_private, tail_objects

MAX_HEARTBEAT_BYTES = 1 << 20
EGRESS_TAIL_BYTES = 8 << 20
MINUTE_MS = 60_000
DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Finding:
    text: str
    repage_minutes: float | None = None  # None: paged once until it recovers


@dataclass
class Observation:
    failing: dict[str, Finding] = field(default_factory=dict)
    ran: set[str] = field(default_factory=set)  # the families that could look

    def fail(self, key: str, text: str, repage: float | None = None) -> None:
        self.failing[key] = Finding(text, repage)

    def ran_failing(self, key: str, text: str) -> None:
        """``key``'s family could look, and found ``key`` failing."""
        self.ran.add(family(key))
        self.fail(key, text)

    def covers(self, key: str) -> bool:
        return family(key) in self.ran


def family(key: str) -> str:
    return key.split(":", 1)[0]


def _why(exc: Exception) -> str:
    if isinstance(exc, CoordinatorError):
        return f"{exc.code}: {exc.message}"
    return str(exc)


class Coordinator(ProjectApi):
    """The coordinator as the attention credential reads it."""

    def healthz(self) -> None:
        self.transport.send("GET", "/healthz")

    def tasks(self, status: str) -> list[TaskSummary]:
        return list(reads.tasks(self.get, f"&work_status={status}"))


def run_checks(config: AttentionConfig, token: str, first_run_ms: int, now_ms: int) -> Observation:
    seen = Observation()
    checks = config.checks
    if checks.heartbeat is not None:
        heartbeat(seen, checks.heartbeat, config, now_ms)
    if checks.egress_log is not None and checks.egress_denials > 0:
        egress(seen, checks.egress_log, checks.egress_denials, checks.egress_window_minutes, now_ms)
    origin = config.coordinator_origin()
    with Transport(origin, token) as transport:
        coord = Coordinator(transport, config.project_id)
        try:
            coord.healthz()
        except AgentcError as exc:
            seen.ran_failing(
                "coordinator", f"the coordinator at {origin} is not healthy: {_why(exc)}"
            )
            return seen
        seen.ran.add("coordinator")
        supervisor_next(seen, config, token, now_ms)
        coordinator_checks(seen, coord, config, first_run_ms, now_ms)
    return seen


def supervisor_next(seen: Observation, config: AttentionConfig, token: str, now_ms: int) -> None:
    """``next`` answers within the budget (a read: it claims nothing)."""
    budget = config.checks.next_budget_seconds
    timeout = httpx.Timeout(budget)
    started = time.monotonic()
    with Transport(config.coordinator_origin(), token, timeout=timeout) as transport:
        try:
            Coordinator(transport, config.project_id).get("/next?role=implementer")
        except TransportFailure as exc:
            cause = exc.__cause__
            if isinstance(cause, httpx.TransportError) and not isinstance(
                cause, httpx.TimeoutException
            ):
                # The connection failed, not the budget: the coordinator went away after its
                # health answered. Its own check says so at the next run; `next` could not look.
                return
            seen.ran_failing("next", f"next did not answer within {budget:g} s: {exc}")
            return
        except CoordinatorError as exc:
            seen.ran_failing("next", f"next was refused: {_why(exc)}")
            return
    seen.ran.add("next")
    took = time.monotonic() - started
    if took > budget:
        seen.fail("next", f"next took {took:.1f} s (budget {budget:g} s)")


def coordinator_checks(
    seen: Observation, coord: Coordinator, config: AttentionConfig, first_run: int, now: int
) -> None:
    checks = config.checks
    try:
        digest = coord.get("/attention")
    except CoordinatorError as exc:
        seen.ran_failing("digest", f"the digest cannot be read: {_why(exc)}")
        digest = None
    except TransportFailure:
        digest = None
    if digest is not None:
        seen.ran.update({"digest", "interventions", "neglect"})
        count = int(digest.get("needs_attention", 0))
        if checks.max_interventions and count > checks.max_interventions:
            seen.fail(
                "interventions",
                f"{count} things need a person (more than {checks.max_interventions})",
            )
        neglect(seen, digest, checks.neglect_days, first_run, now)
    try:
        waiting = coord.tasks("waiting_integration")
        if checks.integrator_reports is not None and checks.target_block_minutes > 0:
            target(seen, checks.integrator_reports, len(waiting), config, now)
        if checks.lease_overdue_minutes > 0:
            leases(seen, coord, config, now)
    except TransportFailure:
        return
    except CoordinatorError as exc:
        seen.ran_failing("digest", f"the project's tasks cannot be read: {_why(exc)}")
    if checks.backups:
        backups(seen, coord)


def backups(seen: Observation, coord: Coordinator) -> None:
    """The installation's backups as the coordinator judges them: the very status
    ``backup-status`` prints and the console's Backups page shows (its newest verified snapshot
    and off-server copy within the bound, its repository configured and readable)."""
    try:
        found = coord.get("/attention/backups")
    except TransportFailure:
        return
    except CoordinatorError as exc:
        seen.ran_failing("backup", f"the backup status cannot be read: {_why(exc)}")
        return
    seen.ran.add("backup")
    if found.get("ok") is not True:
        problems = [str(p) for p in found.get("problems") or []] or ["not ok"]
        seen.fail("backup", "backups: " + "; ".join(problems))


def neglect(
    seen: Observation, digest: dict[str, Any], days: float, first_run: int, now: int
) -> None:
    """The digest unread for more than ``days`` (0: off); never read counts from the first run."""
    if days <= 0:
        return
    read = digest.get("last_read") or {}
    read_at = ms_of(read.get("at")) if isinstance(read, dict) else None
    since = first_run if read_at is None else read_at
    if now - since > days * DAY_MS:
        what = "was never read" if not read else f"was last read {read.get('at')}"
        seen.fail("neglect", f"the attention digest {what} (more than {days:g} days)")


def heartbeat(seen: Observation, path: Path, config: AttentionConfig, now: int) -> None:
    """The loop's heartbeat: readable and younger than ``heartbeat_max_age_seconds``; what it
    says of the loop's holds (the daily cost cap, an unusable vendor)."""
    max_age = config.checks.heartbeat_max_age_seconds
    seen.ran.add("heartbeat")  # what it says of the holds counts only when it is fresh
    try:
        raw = read_private(path, max_bytes=MAX_HEARTBEAT_BYTES, private=False)
        beat = json.loads(raw)
        if not isinstance(beat, dict):
            raise ValueError("not an object")
    except UnsafeFile as exc:
        kind = "FileNotFoundError" if exc.missing else exc.reason
        seen.fail("heartbeat", f"supervisor heartbeat unreadable ({kind})")
        return
    except ValueError as exc:
        seen.fail("heartbeat", f"supervisor heartbeat unreadable ({type(exc).__name__})")
        return
    at = beat.get("at_ms")
    if not isinstance(at, int):
        at = int(path.stat().st_mtime * 1000)
    age = (now - at) / 1000
    if age > max_age:
        launch = beat.get("launch")
        during = ""
        if isinstance(launch, dict):
            role, task = launch.get("role"), launch.get("task")
            during = f" (last seen during the {role}'s launch of task {task})"
        seen.fail(
            "heartbeat", f"supervisor heartbeat is {age:.0f} s old (limit {max_age:g}){during}"
        )
        return
    seen.ran.update({"cost_cap", "vendor"})
    holds = beat.get("holds") if isinstance(beat.get("holds"), dict) else {}
    assert isinstance(holds, dict)
    if isinstance(holds.get("cost_cap"), str):
        seen.fail("cost_cap", f"the supervisor claims nothing: {holds['cost_cap']}")
    vendors = beat.get("vendors") if isinstance(beat.get("vendors"), list) else []
    assert isinstance(vendors, list)
    for vendor in vendors:
        if isinstance(vendor, dict) and isinstance(vendor.get("name"), str):
            _vendor(seen, vendor, config.checks.vendor_limit_minutes, now)


def _vendor(seen: Observation, vendor: dict[str, Any], limit_minutes: float, now: int) -> None:
    """A vendor signed out (or its credential gone) fails at once; a rate-limited one when
    it stays limited for ``vendor_limit_minutes`` or more."""
    name = vendor["name"]
    if vendor.get("reason"):
        seen.fail(f"vendor:{name}", f"vendor {name}: {vendor['reason']}")
        return
    until = vendor.get("until_ms")
    if isinstance(until, int) and until - now >= limit_minutes * MINUTE_MS:
        minutes = max(0, (until - now) // MINUTE_MS)
        seen.fail(f"vendor:{name}", f"vendor {name}: rate-limited for {minutes} more minutes")


def egress(seen: Observation, path: Path, most: int, window_minutes: float, now: int) -> None:
    """A launch refused by the egress proxy ``most`` times or more within the window."""
    seen.ran.add("egress")
    since = now - int(window_minutes * MINUTE_MS)
    counts: Counter[str] = Counter()
    for row in tail_objects(path, EGRESS_TAIL_BYTES):
        at = ms_of(row.get("time"))
        launch = row.get("launch")
        if row.get("allowed") is False and isinstance(launch, str) and at and at >= since:
            counts[launch] += 1
    for launch, count in counts.items():
        if count >= most:
            seen.fail(
                f"egress:{launch}",
                f"launch {launch} was refused {count} connections by the egress proxy in "
                f"{window_minutes:g} minutes (limit {most})",
            )


def target(
    seen: Observation, reports: Path, waiting: int, config: AttentionConfig, now: int
) -> None:
    """A red target blocking integration: the integrator's latest verdict about the target is
    ``target_red`` and tasks wait in integration, for more than ``target_block_minutes``."""
    seen.ran.add("target")
    rows = [r for r in tail_objects(reports, EGRESS_TAIL_BYTES) if isinstance(r.get("target"), str)]
    if not rows or rows[-1].get("event") != "target_red" or not waiting:
        return
    red = str(rows[-1]["target"])
    since = now
    for row in reversed(rows):
        if row.get("target") != red:
            break
        if row.get("event") == "target_red":
            since = ms_of(row.get("at")) or since
    checks = config.checks
    if now - since <= checks.target_block_minutes * MINUTE_MS:
        return
    failed = [c.get("name") for c in rows[-1].get("checks") or [] if isinstance(c, dict)]
    check = failed[-1] if failed else "a required check"
    seen.fail(
        f"target:{red[:12]}",
        f"project {config.project_id}: the target {red[:12]} fails {check}; {waiting} task(s) "
        f"wait in integration behind it (red for {(now - since) // MINUTE_MS} minutes)",
        checks.target_repage_minutes,
    )


def leases(seen: Observation, coord: Coordinator, config: AttentionConfig, now: int) -> None:
    """An attempt held longer than its budget plus ``lease_overdue_minutes``: the project's
    ``max_attempt_seconds``, or ``attempt_budget_minutes`` when the project sets none."""
    checks = config.checks
    overdue_minutes = checks.lease_overdue_minutes
    project = coord.get("")
    budget_ms = int(project["policy"]["max_attempt_seconds"]) * 1000
    budget_ms = budget_ms or int(checks.attempt_budget_minutes * MINUTE_MS)
    for task in coord.tasks("in_progress"):
        current = task.get("current_attempt_id")
        if not current:
            continue
        detail = coord.get(f"/tasks/{quote(str(task['id']), safe='')}")
        for attempt in detail.get("attempts", []):
            if attempt.get("id") != current or attempt.get("state") != "active":
                continue
            started = ms_of(attempt.get("created_at"))
            if started is None:
                continue
            over = now - started - budget_ms
            if over > overdue_minutes * MINUTE_MS:
                seen.fail(
                    f"lease:{current}",
                    f"task {task.get('title')!r} ({task['id']}): attempt {current} is held "
                    f"{over // MINUTE_MS} minutes past its budget of {budget_ms // 1000} s",
                )
    seen.ran.add("lease")
