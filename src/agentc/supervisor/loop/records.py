"""The loop's own records under ``<state>/loop/`` (never writable by a launch: the state root is
masked in every launch): one launch record per launch (implementer or reviewer), and the
heartbeat.

A launch record is written atomically (:func:`agentc.files.write_atomic`) after the claim and
before the spawn, and rewritten with the launch's pid and ``/proc`` start time once it runs. On
the next poll (or after a restart) :func:`may_be_alive` decides whether the launch may still
run, so a live launch is never started twice and a dead one is settled.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentc.core.errors import SupervisorError
from agentc.files import locks, read_tail, write_atomic
from agentc.files.procs import start_ticks

NO_PID_GRACE_MS = 120_000
MAX_RELEASE_TRIES = 5
KEEP_FINISHED = 50
KEEP_TAILS = 20
KEEP_STRIKES = 500
TAIL_BYTES = 1 << 20
HARNESS_LEDGER = "harness-ledger.jsonl"  # the rows of launches costed from their own events


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class LaunchRecord:
    """What the loop knows of one launch (``loop/launches/<launch>.json``): an implementer's
    task attempt, or a reviewer's review attempt (``role``, ``activity``, ``submission``)."""

    launch_id: str
    project: str
    task: str
    attempt: str | None  # None: written before the claim answered
    generation: int
    boot_id: str | None
    loop_pid: int
    loop_ticks: int | None
    recorded_ms: int
    vendor: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    start_ticks: int | None = None
    released: bool = False
    release_failures: int = 0
    outcome: str | None = None
    role: str = "implementer"
    activity: str | None = None  # a review's workflow activity
    submission: str | None = None  # the submission under review
    canary: bool = False  # the dedicated canary project's (its ledger rows are marked too)
    started_ms: int | None = None  # when the launch's process started (its run's duration)
    prompt_sha256: str | None = None  # of the prompt the launch was given (its provenance)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchRecord:
        return cls(**data)


class Records:
    """The loop's files: ``launches/``, ``sessions/`` (its private coordinator state per
    launch), ``heartbeat.json``."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "loop"
        self.launches = self.root / "launches"
        self.sessions = self.root / "sessions"
        self.finished = self.root / "finished"
        self.heartbeat = self.root / "heartbeat.json"

    def ensure(self) -> None:
        for path in (self.root, self.launches, self.sessions, self.finished):
            path.mkdir(mode=0o700, exist_ok=True)
            os.chmod(path, 0o700)

    def path(self, launch_id: str) -> Path:
        return self.launches / f"{launch_id}.json"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """The loop's files read, changed and written back by several launches at once
        (``unsubmitted.json``, ``review-strikes.json``, the kept tails, the vendor marks), one
        launch at a time: an exclusive lock on ``loop/.lock``."""
        with locks.locked(self.root / ".lock"):
            yield

    def write(self, record: LaunchRecord) -> None:
        data = json.dumps(asdict(record), indent=2, sort_keys=True).encode() + b"\n"
        write_atomic(self.path(record.launch_id), data, mode=0o600)

    def all(self) -> list[LaunchRecord]:
        """Every record, oldest first; a damaged one is named in an error, never skipped."""
        records = []
        for path in sorted(self.launches.glob("*.json")):
            try:
                records.append(LaunchRecord.from_json(json.loads(path.read_bytes())))
            except (OSError, ValueError, TypeError) as exc:
                raise RecordError(f"{path}: the launch record is damaged ({exc})") from None
        return sorted(records, key=lambda r: r.recorded_ms)

    def remove(self, launch_id: str) -> None:
        self.path(launch_id).unlink(missing_ok=True)

    def finish(self, record: LaunchRecord) -> None:
        """Move the settled record to ``finished/`` (the newest KEEP_FINISHED are kept)."""
        data = json.dumps(asdict(record), indent=2, sort_keys=True).encode() + b"\n"
        write_atomic(self.finished / f"{record.launch_id}.json", data, mode=0o600)
        self.remove(record.launch_id)
        kept = sorted(self.finished.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in kept[:-KEEP_FINISHED]:
            old.unlink(missing_ok=True)

    def keep_tails(
        self, launch_id: str, run: Path, names: tuple[str, ...] = ("events.jsonl", "stderr.log")
    ) -> Path:
        """Copy the tails (at most 1 MiB each) of the run's ``events.jsonl`` and ``stderr.log``
        (or ``names``) to ``unsubmitted/<launch>/`` (0700, files 0600; the newest KEEP_TAILS
        kept)."""
        with self.lock():
            return self._keep_tails(launch_id, run, names)

    def _keep_tails(self, launch_id: str, run: Path, names: tuple[str, ...]) -> Path:
        folder = self.root / "unsubmitted"
        folder.mkdir(mode=0o700, exist_ok=True)
        target = folder / launch_id
        target.mkdir(mode=0o700, exist_ok=True)
        for name in names:
            try:  # in host mode the run is the role's: no link, no FIFO, a regular file only
                tail = read_tail(run / name, TAIL_BYTES)
            except OSError:
                continue
            write_atomic(target / name, tail, mode=0o600)
        kept = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime)
        for old in kept[:-KEEP_TAILS]:
            shutil.rmtree(old, ignore_errors=True)
        return target

    def empty_exits(self) -> dict[str, Any]:
        """``unsubmitted.json``: launches that exited 0 without a submission or release, per
        task and in a row in total (unreadable: counts as the operator's hold, never as none)."""
        path = self.root / "unsubmitted.json"
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return {"tasks": {}, "total": 0}
        except (OSError, ValueError):
            return {"tasks": {}, "total": 1 << 30, "damaged": True}
        if not isinstance(data, dict):
            return {"tasks": {}, "total": 1 << 30, "damaged": True}
        return data

    def count_empty_exit(self, task: str | None) -> None:
        """One more empty exit (task given), or a submission that resets the counts (None)."""
        with self.lock():
            self._count_empty_exit(task)

    def _count_empty_exit(self, task: str | None) -> None:
        data = self.empty_exits()
        if data.get("damaged"):
            return
        if task is None:
            if not data["tasks"] and not data["total"]:
                return
            data = {"tasks": {}, "total": 0}
        else:
            data["tasks"][task] = int(data["tasks"].get(task, 0)) + 1
            data["total"] = int(data.get("total", 0)) + 1
        body = json.dumps(data, indent=2, sort_keys=True).encode() + b"\n"
        write_atomic(self.root / "unsubmitted.json", body, mode=0o600)

    @property
    def strikes_path(self) -> Path:
        return self.root / "review-strikes.json"

    def review_strikes(self) -> dict[str, dict[str, Any]]:
        """``review-strikes.json``: per submission, the reviews in a row that posted no verdict
        (``failures``, the ``task``, the ``last`` reason); an unreadable file is an error."""
        try:
            data = json.loads(self.strikes_path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RecordError(f"{self.strikes_path}: cannot be read ({exc})") from None
        return data if isinstance(data, dict) else {}

    def strike(self, submission: str, task: str, reason: str) -> int:
        """One more failed review of ``submission``; returns how many in a row."""
        with self.lock():
            return self._strike(submission, task, reason)

    def _strike(self, submission: str, task: str, reason: str) -> int:
        data = self.review_strikes()
        entry = data.get(submission) if isinstance(data.get(submission), dict) else None
        failures = int((entry or {}).get("failures", 0)) + 1
        data[submission] = {"failures": failures, "task": task, "last": reason[:1000]}
        for old in list(data)[:-KEEP_STRIKES]:
            del data[old]
        self._write_strikes(data)
        return failures

    def clear_strike(self, submission: str) -> None:
        """A verdict was posted: the submission's failures no longer count."""
        with self.lock():
            data = self.review_strikes()
            if data.pop(submission, None) is not None:
                self._write_strikes(data)

    def _write_strikes(self, data: dict[str, Any]) -> None:
        body = json.dumps(data, indent=2).encode() + b"\n"
        write_atomic(self.strikes_path, body, mode=0o600)

    def write_heartbeat(self, data: dict[str, Any]) -> None:
        body = json.dumps({"pid": os.getpid(), "at_ms": now_ms(), **data}, sort_keys=True)
        write_atomic(self.heartbeat, body.encode() + b"\n", mode=0o600)


class RecordError(SupervisorError):
    """A launch record cannot be read."""


def _runs(pid: int | None, ticks: int | None) -> bool:
    """Whether ``pid`` runs with the start time ``ticks``: a zombie (exited, its parent has
    not reaped it yet) does not."""
    now = None if pid is None else start_ticks(pid)
    return now is not None and (ticks is None or now == ticks)


def may_be_alive(record: LaunchRecord, *, boot: str | None, now: int) -> bool:
    """Whether the recorded launch may still run (then it is never started again).

    Another boot: dead. A pid with its start time: alive only while that process runs. No pid
    yet (its process died between the record and the spawn): the launch is spawned by the
    process that wrote the record (``loop_pid``: the loop's worker for this launch) and dies
    with it (bwrap ``--die-with-parent``), so it is dead once that process is gone; with it
    unknown, alive for two minutes after the record.
    """
    if record.boot_id is None or boot is None:
        return True
    if record.boot_id != boot:
        return False
    if record.pid is not None:
        return _runs(record.pid, record.start_ticks)
    if record.loop_ticks is not None:
        return _runs(record.loop_pid, record.loop_ticks)
    return now - record.recorded_ms < NO_PID_GRACE_MS
