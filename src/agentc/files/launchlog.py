"""A launch's event log: one append-only JSON-lines file per launch, written outside its sandbox.

``<launch_logs>/<launch id>.jsonl`` (docs/gateway.md "The launch's event log", decision D47).
Its writers are the host-side programs that see the launch from outside: the model gateway (each
model call, with the policy's decision), the egress proxy (each connection allowed or refused,
and the bytes it carried), and the supervisor loop when the launch is over (how it ended, the
limit it hit, the reaper's kills, its pushes, a loop breaker). No launch can reach the
directory: it is never bound into a sandbox, and the state directories that hold it are masked.

Every line is ``{"seq": n, "prev": <SHA-256 of the previous line>, "at": ..., "source": ...,
"event": ..., ...}``. :class:`LaunchLogs` appends under an exclusive ``flock`` of the file: it
reads back the last line (its number and digest) and writes the new one with one ``write`` on an
``O_APPEND`` descriptor, so the writers of several processes keep one chain. A line changed,
removed, inserted or reordered afterwards breaks the chain, which :func:`read_log` reports.
:func:`summarize` is what a submission carries: the calls, the spend, the hosts reached, the
denials and anything unusual.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentc.core.errors import ConfigError
from agentc.core.rules import rfc3339
from agentc.files.jsonl import json_line

GENESIS = "0" * 64
LAUNCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_LINE = 16 * 1024  # a longer event is cut to its kind (one line is always read back whole)
READ_MAX = 64 * 1024 * 1024  # the most of a log read for its summary
_TAIL = 2 * MAX_LINE
LIST_MAX = 20  # hosts, denials and pushes kept in a summary


class LaunchLogError(ConfigError):
    """The log directory is missing or unsafe (names the path and the problem)."""


def check_directory(path: Path) -> None:
    """``path`` must be a real directory (no symlink) of this account's or root's, writable by
    no one else: the event logs are the host's record of what launches did."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise LaunchLogError(f"launch log directory {path}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise LaunchLogError(f"launch log directory {path}: not a directory (or a symlink)")
    if info.st_uid not in (0, os.geteuid()) or info.st_mode & 0o022:
        raise LaunchLogError(
            f"launch log directory {path}: must be yours or root's and writable by no one else "
            f"(owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o})"
        )


def ensure_directory(path: Path) -> Path:
    """Make ``path`` (0700) if it is missing, then check it; returns it."""
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    except OSError as exc:
        raise LaunchLogError(f"launch log directory {path}: {exc.strerror}") from None
    check_directory(path)
    return path


def log_path(directory: Path, launch_id: str) -> Path | None:
    """The launch's log file, or None for a launch id that is no safe file name."""
    return directory / f"{launch_id}.jsonl" if LAUNCH_ID.fullmatch(launch_id) else None


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def _last_line(fd: int) -> tuple[int, str, bool]:
    """(the last line's number, its SHA-256, whether the file ends a line). A last line that is
    torn (a crash mid-write) or unreadable counts as a line: its number is that of the nearest
    readable line before it plus the lines between."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0, GENESIS, True
    start = max(0, size - _TAIL)
    tail = os.pread(fd, size - start, start)
    whole = tail.endswith(b"\n")
    lines = (tail[:-1] if whole else tail).split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first may be the end of a line that began before the window
    seq = -1
    for back, line in enumerate(reversed(lines)):
        try:
            seq = int(json.loads(line)["seq"]) + back
            break
        except (ValueError, KeyError, TypeError):
            continue
    return seq, _digest(lines[-1] + b"\n"), whole


def _line(seq: int, prev: str, source: str, event: dict[str, Any]) -> bytes:
    record = {"seq": seq, "prev": prev, "at": rfc3339(time.time_ns() // 1_000_000)}
    record.update(source=source, **event)
    text = json_line(record).encode()
    if len(text) > MAX_LINE:
        cut = {k: record[k] for k in ("seq", "prev", "at", "source", "event") if k in record}
        text = json_line({**cut, "truncated": True}).encode()
    return text


@dataclass
class _Held:
    """A log file a writer keeps open, and what it knows of its end after its last write."""

    fd: int
    path: str
    inode: int
    size: int = -1  # unknown: read the tail back
    seq: int = 0
    digest: str = GENESIS


@dataclass
class LaunchLogs:
    """One writer (``source``: ``gateway``, ``egress``, ``supervisor``) of a log directory.

    It keeps the files of its ``keep_open`` most recent launches open and remembers each one's
    end after its own last write, so an append costs a lock, one ``fstat`` and one ``write``;
    the tail is read back only when the file grew meanwhile (another writer), and a file no
    longer at its path (removed, replaced) is opened again.
    """

    directory: Path
    source: str
    keep_open: int = 64
    _held: OrderedDict[str, _Held] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def append(self, launch_id: str, event: dict[str, Any]) -> bool:
        """Append ``event`` (with its ``event`` kind) to the launch's log; False when the launch
        id is no safe file name (nothing written). OSError when the file cannot be written."""
        with self._lock:
            held = self._hold(launch_id)
            if held is None:
                return False
            fd = held.fd
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
                if size == held.size:
                    seq, prev, whole = held.seq, held.digest, True
                else:
                    seq, prev, whole = _last_line(fd)
                line = _line(max(seq, 0) + 1, prev, self.source, event)
                data = line if whole else b"\n" + line
                os.write(fd, data)  # one write: O_APPEND keeps it whole
                held.size, held.seq, held.digest = size + len(data), max(seq, 0) + 1, _digest(line)
            except BaseException:
                self._drop(launch_id)
                raise
            finally:
                if launch_id in self._held:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        return True

    def _hold(self, launch_id: str) -> _Held | None:
        """The launch's open file (opened, or opened again when its path names another); None
        for a launch id that is no safe file name."""
        held = self._held.get(launch_id)
        if held is not None:
            try:
                same = os.stat(held.path, follow_symlinks=False).st_ino == held.inode
            except FileNotFoundError:
                same = False
            if same:
                self._held.move_to_end(launch_id)
                return held
            self._drop(launch_id)
        path = log_path(self.directory, launch_id)
        if path is None:
            return None
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        held = self._held[launch_id] = _Held(fd, str(path), os.fstat(fd).st_ino)
        while len(self._held) > self.keep_open:
            self._drop(next(iter(self._held)))
        return held

    def _drop(self, launch_id: str) -> None:
        held = self._held.pop(launch_id, None)
        if held is not None:
            os.close(held.fd)

    def close(self) -> None:
        with self._lock:
            while self._held:
                self._drop(next(iter(self._held)))


@dataclass
class LogRead:
    """A launch's events as read back, and what is wrong with the log (in words)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_log(directory: Path, launch_id: str) -> LogRead:
    """Read and check a launch's log: every line JSON, numbered 1, 2, 3 …, each chained to the
    one before. A missing log reads as empty."""
    found = LogRead()
    path = log_path(directory, launch_id)
    if path is None:
        found.problems.append("the launch id is no safe file name: no log")
        return found
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return found
    except OSError as exc:
        found.problems.append(f"the log cannot be read: {exc.strerror}")
        return found
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            found.problems.append("the log is not a regular file")
            return found
        raw = handle.read(READ_MAX + 1)
    if len(raw) > READ_MAX:
        found.problems.append(f"the log is longer than {READ_MAX} bytes: only its start is read")
        raw = raw[: raw.rfind(b"\n", 0, READ_MAX) + 1]
    _check_lines(raw, found)
    return found


def _check_lines(raw: bytes, found: LogRead) -> None:
    prev = GENESIS
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        try:
            record = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            record = None
        if not isinstance(record, dict) or not line.endswith(b"\n"):
            found.problems.append(f"line {number} is not a whole JSON object")
        elif record.get("seq") != number or record.get("prev") != prev:
            found.problems.append(f"line {number} breaks the chain (changed, moved or removed)")
        else:
            found.events.append(record)
        prev = _digest(line)


# -------------------------------------------------------------------------------- the summary


def _ranked(counts: Counter[tuple[Any, ...]], names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {**dict(zip(names, key, strict=True)), "count": n}
        for key, n in counts.most_common(LIST_MAX)
    ]


def summarize(read: LogRead) -> dict[str, Any]:
    """What a reviewer reads of a launch besides its diff (docs/gateway.md)."""
    calls = [e for e in read.events if e.get("event") == "model_call"]
    priced = [e["usd"] for e in calls if isinstance(e.get("usd"), int | float)]
    refusals = Counter(str(e.get("outcome")) for e in calls if e.get("outcome") != "ok")
    summary: dict[str, Any] = {
        "events": len(read.events),
        "model_calls": len(calls),
        "usd": round(sum(priced), 6),
        "input_tokens": sum(e.get("input_tokens") or 0 for e in calls),
        "output_tokens": sum(e.get("output_tokens") or 0 for e in calls),
        "models": sorted({str(e["model"]) for e in calls if e.get("model")})[:LIST_MAX],
        "refused_calls": dict(refusals),
        **_network(read.events),
        "pushes": [
            {k: e.get(k) for k in ("ok", "ref", "error")}
            for e in read.events
            if e.get("event") == "push"
        ][:LIST_MAX],
        "ended": next((_ended(e) for e in read.events if e.get("event") == "launch_ended"), None),
    }
    summary["unusual"] = _unusual(read, summary, calls)
    return summary


def _network(events: list[dict[str, Any]]) -> dict[str, Any]:
    reached: dict[tuple[Any, Any], dict[str, Any]] = {}
    denied: Counter[tuple[Any, ...]] = Counter()
    for e in events:
        key = (e.get("host"), e.get("port"))
        if e.get("event") == "connection" and e.get("allowed"):
            host = reached.setdefault(key, {"host": key[0], "port": key[1], "connections": 0})
            host["connections"] += 1
        elif e.get("event") == "connection":
            denied[(key[0], key[1], e.get("reason"))] += 1
        elif e.get("event") == "connection_closed" and key in reached:
            for side in ("bytes_up", "bytes_down"):
                reached[key][side] = reached[key].get(side, 0) + int(e.get(side) or 0)
    hosts = sorted(reached.values(), key=lambda h: -h["connections"])[:LIST_MAX]
    return {"hosts": hosts, "denied": _ranked(denied, ("host", "port", "reason"))}


def _ended(event: dict[str, Any]) -> dict[str, Any]:
    keys = ("exit_code", "signal", "limit", "cap", "stop", "killed", "stopped_by")
    return {k: event.get(k) for k in keys if event.get(k) is not None}


def _unusual(read: LogRead, summary: dict[str, Any], calls: list[dict[str, Any]]) -> list[str]:
    said = list(read.problems[:5])
    refused = summary["refused_calls"]
    for outcome, what in (
        ("refused_policy", "refused by the model policy"),
        ("refused_cap", "refused by a cost cap"),
        ("refused_path", "the gateway does not forward (not a harness call)"),
        ("refused_breaker", "refused by a loop breaker"),
    ):
        if refused.get(outcome):
            said.append(f"{refused[outcome]} model call(s) {what}")
    estimated = sum(1 for e in calls if e.get("estimated"))
    if estimated:
        said.append(f"{estimated} model call(s) charged an estimate (no final usage)")
    denied = sum(d["count"] for d in summary["denied"])
    if denied:
        said.append(f"{denied} network connection(s) refused by the egress proxy")
    if any(p.get("ok") is False for p in summary["pushes"]):
        said.append("a push was refused by the push helper")
    ended = summary["ended"] or {}
    if ended.get("limit"):
        said.append(f"the launch hit its {ended['limit']} limit")
    stop = ended.get("stop")
    if isinstance(stop, dict) and stop.get("reason"):
        said.append(f"the gateway ended its model access: {stop['reason']}")
    if ended.get("stopped_by"):
        said.append(f"the supervisor stopped it: {ended['stopped_by']}")
    if ended.get("killed"):
        said.append(f"the reaper killed {sum(ended['killed'].values())} leftover process(es)")
    return said
