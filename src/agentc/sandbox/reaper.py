"""Child-subreaper duties: after the harness exits, nothing it started survives.

The launch process marks itself ``PR_SET_CHILD_SUBREAPER``, so every process orphaned below it
(double-forked, ``setsid``'d) is re-parented to it instead of to init. After the sandbox exits,
``reap_leftovers`` walks ``/proc`` for descendants, kills the living ones in rounds and reaps
every zombie, so the run is marked terminal only when nothing of the launch is left. It waits
only on pids it found below itself, never ``waitpid(-1)``, so a host process (or a test runner)
embedding the launch keeps its other children.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import time
from collections import Counter
from dataclasses import dataclass, field

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
CLOSE_RANGE_CLOEXEC = 1 << 2
SYS_CLOSE_RANGE = 436  # x86-64 and aarch64 share this number

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_child_subreaper() -> None:
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def child_setup() -> None:
    """Run in the forked child before exec: no new privileges, every fd above 2 CLOEXEC."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if _libc.syscall(SYS_CLOSE_RANGE, 3, 0xFFFFFFFF, CLOSE_RANGE_CLOEXEC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "close_range(CLOSE_RANGE_CLOEXEC) failed")


@dataclass
class ReapReport:
    killed: Counter[str] = field(default_factory=Counter)
    reaped: Counter[str] = field(default_factory=Counter)
    survivors: list[int] = field(default_factory=list)

    def line(self) -> str | None:
        """One stderr line naming what was killed and reaped, or None if nothing was left."""

        def names(counts: Counter[str]) -> str:
            return ", ".join(f"{n} x{c}" for n, c in sorted(counts.items()))

        parts = []
        if self.killed:
            total = sum(self.killed.values())
            parts.append(f"killed {total} leftover launch processes ({names(self.killed)})")
        if self.reaped:
            total = sum(self.reaped.values())
            parts.append(f"reaped {total} exited launch processes ({names(self.reaped)})")
        if self.survivors:
            parts.append(f"{len(self.survivors)} processes survived: {self.survivors}")
        return "agentc-supervisor: " + "; ".join(parts) if parts else None


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(comm, state, ppid) of ``pid``; comm may contain spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    head, _, tail = raw.rpartition(")")
    fields = tail.split()
    comm = head.partition("(")[2]
    return comm, fields[0], int(fields[1])


def _children_files_exist() -> bool:
    me = os.getpid()
    return os.path.exists(f"/proc/{me}/task/{me}/children")


_CHILDREN_FILES = _children_files_exist()


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (``/proc/<pid>/task/<tid>/children``)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found.extend(int(child) for child in handle.read().split())
        except OSError:
            continue  # the thread (or the process) has just exited
    return found


def _walk(root: int) -> dict[int, tuple[str, str]]:
    """Descendants by the kernel's per-thread children lists: only our own tree is read.

    A listed pid is kept only when its ``/proc/<pid>/stat`` names the parent it was listed
    under, so a pid that exited and was reused by an unrelated process is never taken for ours.
    A child moved (re-parented to this subreaper) while we read shows under us on the next
    round of :func:`reap_leftovers`, which stops only when nothing is listed under us.
    """
    result: dict[int, tuple[str, str]] = {}
    stack = [(root, child) for child in _children(root)]
    while stack:
        parent, pid = stack.pop()
        if pid in result:
            continue
        found = _stat(pid)
        if found is None or found[2] != parent:
            continue
        result[pid] = (found[0], found[1])
        stack.extend((pid, child) for child in _children(pid))
    return result


def _scan(root: int) -> dict[int, tuple[str, str]]:
    """Descendants by a scan of every ``/proc`` entry (kernels without children lists)."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        found = _stat(int(entry))
        if found is None:
            continue
        comm, state, ppid = found
        info[int(entry)] = (comm, state)
        children.setdefault(ppid, []).append(int(entry))
    result: dict[int, tuple[str, str]] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in result or pid not in info:
            continue
        result[pid] = info[pid]
        stack.extend(children.get(pid, []))
    return result


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """Every live or zombie process below ``root``: pid -> (comm, state).

    Walks only ``root``'s tree where the kernel keeps children lists (``CONFIG_PROC_CHILDREN``,
    on in Debian's kernels): a few reads instead of one per process on the host.
    """
    return _walk(root) if _CHILDREN_FILES else _scan(root)


def reap_leftovers(
    exclude: frozenset[int] = frozenset(), grace: float = 1.0, deadline: float = 10.0
) -> ReapReport:
    """Reap every descendant of this process except ``exclude``, bounded in time.

    For ``grace`` seconds processes may still exit by themselves (bwrap's pid 1 reports the
    harness status before it exits, and its exit tears down the PID namespace); whatever is
    still alive after that is killed with SIGKILL, in rounds, until nothing is left.
    """
    report = ReapReport()
    me = os.getpid()
    start = time.monotonic()
    seen_alive: set[int] = set()
    while True:
        found = {p: v for p, v in descendants(me).items() if p not in exclude}
        if not found:
            break
        now = time.monotonic()
        if now - start > grace:
            for pid, (comm, state) in found.items():
                if state == "Z":
                    continue
                if pid not in seen_alive:
                    seen_alive.add(pid)
                    report.killed[comm] += 1
                with contextlib.suppress(ProcessLookupError):  # ESRCH: already gone
                    os.kill(pid, signal.SIGKILL)
        for pid, (comm, _state) in found.items():
            with contextlib.suppress(ChildProcessError):  # ECHILD: not our direct child yet
                done, _status = os.waitpid(pid, os.WNOHANG)
                if done and pid not in seen_alive:
                    report.reaped[comm] += 1
        if now - start > grace + deadline:
            report.survivors = sorted(found)
            break
        living = [pid for pid, (_comm, state) in found.items() if state != "Z"]
        _until_one_exits(living, 0.002 if now - start < 0.05 else 0.02)
    return report


def _until_one_exits(pids: list[int], seconds: float) -> None:
    """Sleep up to ``seconds``, waking as soon as one of ``pids`` exits (a pidfd becomes
    readable then): the launch's pid 1 is usually a few milliseconds from its exit."""
    fds: list[int] = []
    try:
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                return  # already gone: look again at once
            except OSError:  # no pidfds here (kernel < 5.3) or no descriptor left
                break
        else:
            if fds:
                select.select(fds, [], [], seconds)
                return
        time.sleep(seconds)
    finally:
        for fd in fds:
            os.close(fd)
