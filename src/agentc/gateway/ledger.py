"""The host-side usage ledger (JSONL, append-only, 0600) and the dollar caps it feeds.

One row per metered call (:func:`agentc.files.json_line`, one ``write`` with ``O_APPEND``),
keyed by the launch id (``session`` in the row; format in docs/gateway.md). A call refused by a
cap also gets a row (zero tokens, ``refused_cap``), so the host-side record names the cap. Caps
are checked before forwarding against what is already recorded: per launch, per task, and per
day (a rolling 24 hours, per role). A call is refused once the spent amount has reached the
cap; calls already in flight may overshoot it by their own cost.

The model policy (:mod:`agentc.core.model_policy`) adds two limits per attempt: its dollars
(``max_usd``, checked here as the ``attempt`` cap) and its model turns (``max_turns``): a turn
is counted when a metered call is admitted (:meth:`Ledger.admit_turn`), and on start the
ledger's rows of each attempt are counted again.

The live meter (:meth:`Ledger.usage`, the control socket's ``status``): what each launch's rows
add up to so far, summed as each row is appended (and again from the file on start) by
:func:`add_call`, the one rule that sums a launch's rows, which the supervisor's cost row of an
ended launch (``agentc.supervisor.loop.costs``) uses too: the meter of an ended launch is its
cost row's numbers. The supervisor's loop reads the ledger with :func:`read_rows` and a running
launch's spend with :class:`LaunchSpend`: the format has this one home.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.files import json_line, json_objects, open_regular
from agentc.gateway.errors import GatewayError
from agentc.gateway.sentinels import Grant

DAY_MS = 24 * 3600 * 1000
TOKEN_KEYS = ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens")


def new_usage() -> dict[str, Any]:
    """A launch's sums before its first row: no calls, no tokens, no dollars."""
    return {"calls": 0, **dict.fromkeys(TOKEN_KEYS, 0), "usd": 0.0}


def add_call(totals: dict[str, Any], row: dict[str, Any]) -> None:
    """Add one ledger row to a launch's sums (``new_usage``): a call (a call refused by a cap
    too: its row has no tokens and no dollars), its tokens by kind, its dollars; the dollars
    are null once a row had no price (``usd`` null: an unknown model)."""
    totals["calls"] += 1
    for key in TOKEN_KEYS:
        value = row.get(key)
        totals[key] += value if isinstance(value, int) and value > 0 else 0
    usd = row.get("usd")
    if totals["usd"] is not None:
        totals["usd"] = round(totals["usd"] + usd, 6) if isinstance(usd, int | float) else None


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The ledger's rows, oldest first: none when there is no ledger; a line that is not a JSON
    object (a torn last line after a crash) is skipped. Any other read error raises."""
    try:
        handle = path.open("r", encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    with handle:
        yield from json_objects(handle)


class LaunchSpend:
    """What one running launch's model calls cost so far, read by another process (the
    supervisor's loop) as the ledger grows (each call reads only the rows written since the
    last; never following a link), summed by :func:`add_call` (the figure the gateway's live
    meter and the launch's cost row show). The figure rides on the launch's lease renewals to
    the console (docs/api.md)."""

    def __init__(self, ledger: Path, launch_id: str) -> None:
        self.ledger, self.launch_id = ledger, launch_id
        self.offset, self.rest = 0, b""
        self.usage = new_usage()

    def spent(self) -> float | None:
        """Dollars so far; None before the launch's first call, or once a call had no price."""
        try:
            with open_regular(self.ledger) as handle:
                if os.fstat(handle.fileno()).st_size < self.offset:  # a new ledger: start over
                    self.offset, self.rest, self.usage = 0, b"", new_usage()
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return self.usd
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and row.get("session") == self.launch_id:
                add_call(self.usage, row)
        return self.usd

    @property
    def tokens(self) -> int | None:
        """Tokens of every kind so far (as of the last :meth:`spent`); None before a call."""
        if not self.usage["calls"]:
            return None
        return sum(int(self.usage[key]) for key in TOKEN_KEYS)

    @property
    def usd(self) -> float | None:
        usd = self.usage["usd"]
        return float(usd) if self.usage["calls"] and usd is not None else None


@dataclass(frozen=True)
class Caps:
    launch_usd: float | None = None
    task_usd: float | None = None
    day_usd: float | None = None


class Ledger:
    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._launch: defaultdict[str, float] = defaultdict(float)  # by launch id
        self._task: defaultdict[str, float] = defaultdict(float)
        self._attempt: defaultdict[str, float] = defaultdict(float)
        self._turns: defaultdict[str, int] = defaultdict(int)  # admitted, by attempt
        self._day: defaultdict[str, deque[tuple[int, float]]] = defaultdict(deque)
        self._day_usd: defaultdict[str, float] = defaultdict(float)  # the sum of each deque
        self._usage: dict[str, dict[str, Any]] = {}  # by launch id: the live meter (add_call)
        self._load()

    def _load(self) -> None:
        try:
            for row in read_rows(self.path):
                self._count(row)
                if not row.get("refused_cap") and row.get("attempt"):
                    self._turns[str(row["attempt"])] += 1
        except OSError as exc:
            raise GatewayError(f"{self.path}: cannot read the ledger: {exc.strerror}") from None

    def _count(self, row: dict[str, Any]) -> None:
        add_call(self._usage.setdefault(str(row.get("session")), new_usage()), row)
        usd = row.get("usd_for_caps")
        if not isinstance(usd, (int, float)) or usd <= 0:
            return
        self._launch[str(row.get("session"))] += usd
        if row.get("task"):
            self._task[str(row["task"])] += usd
        if row.get("attempt"):
            self._attempt[str(row["attempt"])] += usd
        at_ms = row.get("at_ms")
        if isinstance(at_ms, int):
            role = str(row.get("role"))
            self._day[role].append((at_ms, float(usd)))
            self._day_usd[role] += usd

    def append(self, row: dict[str, Any]) -> None:
        line = json_line(row).encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, line)  # one write per row: O_APPEND keeps rows whole
            finally:
                os.close(fd)
            self._count(row)

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def usage(self, launch_id: str) -> dict[str, Any]:
        """What the launch's calls took so far (:func:`add_call`; all zero before its first)."""
        with self._lock:
            return dict(self._usage.get(launch_id) or new_usage())

    def admit_turn(self, attempt: str) -> None:
        with self._lock:
            self._turns[attempt] += 1

    def turns(self, attempt: str) -> int:
        """The attempt's model turns so far (metered calls admitted)."""
        with self._lock:
            return self._turns.get(attempt, 0)

    def spent(self, grant: Grant) -> tuple[float, float, float]:
        """Dollars already recorded for (the launch, its task, its role in the last 24 h)."""
        with self._lock:
            role = grant.role_slug
            day = self._day[role]
            floor = self.now_ms() - DAY_MS
            while day and day[0][0] < floor:
                self._day_usd[role] -= day.popleft()[1]
            if not day:
                self._day_usd[role] = 0.0  # no rounding left over once the window is empty
            return (
                self._launch.get(grant.launch_id, 0.0),
                self._task.get(grant.task, 0.0) if grant.task else 0.0,
                self._day_usd[role],
            )

    def over_cap(self, grant: Grant, caps: Caps) -> tuple[str, float, float] | None:
        """The first cap reached as (name, spent, limit), or None."""
        launch, task, day = self.spent(grant)
        launch_cap = grant.launch_usd if grant.launch_usd is not None else caps.launch_usd
        checks: list[tuple[str, float, float | None]] = [("launch", launch, launch_cap)]
        if grant.policy.max_usd is not None:  # the model policy's dollars per attempt
            with self._lock:
                attempt = self._attempt.get(grant.attempt, 0.0)
            checks.append(("attempt", attempt, grant.policy.max_usd))
        if grant.task:
            checks.append(("task", task, caps.task_usd))
        checks.append(("day", day, caps.day_usd))
        for name, spent, limit in checks:
            if limit is not None and spent >= limit:
                return name, spent, limit
        return None
