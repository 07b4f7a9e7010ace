"""Child-subreaper duties: after a launch ends, nothing it started survives, and nothing else is
touched.

A process that runs launches marks itself ``PR_SET_CHILD_SUBREAPER``, so every process orphaned
below it (double-forked, ``setsid``'d) is re-parented to it instead of to init. After a
launch's sandbox exits, :func:`reap_leftovers` kills the living processes of *that launch* in
rounds and reaps its zombies, so the run is marked terminal only when nothing of the launch is
left. What belongs to a launch is its :class:`Scope`: the processes below its first process
(bwrap), every process in its process group (its own, made at the spawn; an orphan keeps it
when it is re-parented) and every process in its cgroups, and whatever any of those started.
A process in no launch's scope is never signalled, so one launch's end leaves another launch
of the same process running; it waits only on pids of the scope, never ``waitpid(-1)``, so a
caller (a loop with other launches, a test runner) keeps its other children.

:func:`reap_strays` is the other duty of a long-running subreaper (the supervisor loop): every
process below it that is not one of the children it keeps (its launch workers), or below one,
was orphaned to it by something that has ended: it is killed and reaped, so no zombie piles up.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from agentc.files.procs import proc_stat

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


@dataclass(frozen=True)
class Scope:
    """What belongs to one launch: the processes below ``root`` (its first process, while it
    is there), those in its process group ``group``, those in its ``cgroups`` (their
    ``cgroup.procs``; a zombie is no longer listed there) and the ``members`` known by pid (the
    sandbox's init, in a session of its own: :class:`agentc.sandbox.confined.SandboxInfo`),
    and everything any of them started."""

    root: int | None = None
    group: int | None = None
    cgroups: tuple[Path, ...] = ()
    members: tuple[int, ...] = ()


class Proc(NamedTuple):
    """One process as ``/proc/<pid>/stat`` shows it."""

    comm: str  # may contain spaces and parentheses
    state: str
    ppid: int
    pgrp: int


def _stat(pid: int) -> Proc | None:
    found = proc_stat(pid)
    if found is None:
        return None
    comm, fields = found
    return Proc(comm, fields[0], int(fields[1]), int(fields[2]))


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


def _walk(root: int) -> dict[int, Proc]:
    """Descendants by the kernel's per-thread children lists: only our own tree is read.

    A listed pid is kept only when its ``/proc/<pid>/stat`` names the parent it was listed
    under, so a pid that exited and was reused by an unrelated process is never taken for ours.
    A child moved (re-parented to this subreaper) while we read shows under us on the next
    round of :func:`reap_leftovers`, which stops only when nothing is listed under us.
    """
    result: dict[int, Proc] = {}
    stack = [(root, child) for child in _children(root)]
    while stack:
        parent, pid = stack.pop()
        if pid in result:
            continue
        found = _stat(pid)
        if found is None or found.ppid != parent:
            continue
        result[pid] = found
        stack.extend((pid, child) for child in _children(pid))
    return result


def _scan(root: int) -> dict[int, Proc]:
    """Descendants by a scan of every ``/proc`` entry (kernels without children lists)."""
    children: dict[int, list[int]] = {}
    info: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        found = _stat(int(entry))
        if found is None:
            continue
        info[int(entry)] = found
        children.setdefault(found.ppid, []).append(int(entry))
    result: dict[int, Proc] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in result or pid not in info:
            continue
        result[pid] = info[pid]
        stack.extend(children.get(pid, []))
    return result


def tree(root: int) -> dict[int, Proc]:
    """Every live or zombie process below ``root``.

    Walks only ``root``'s tree where the kernel keeps children lists (``CONFIG_PROC_CHILDREN``,
    on in Debian's kernels): a few reads instead of one per process on the host.
    """
    return _walk(root) if _CHILDREN_FILES else _scan(root)


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """Every live or zombie process below ``root``: pid -> (comm, state)."""
    return {pid: (proc.comm, proc.state) for pid, proc in tree(root).items()}


def _cgroup_members(groups: Iterable[Path]) -> set[int]:
    members: set[int] = set()
    for group in groups:
        with contextlib.suppress(OSError, ValueError):
            members.update(int(p) for p in (group / "cgroup.procs").read_text().split())
    return members


def _closure(below: dict[int, Proc], marked: set[int] | frozenset[int]) -> set[int]:
    """The processes of ``below`` that are in ``marked`` or below one of them (by the parent
    links in ``below``)."""
    memo: dict[int, bool] = {}

    def member(pid: int) -> bool:
        chain: list[int] = []
        cursor = pid
        while cursor in below and cursor not in memo and cursor not in marked:
            chain.append(cursor)
            cursor = below[cursor].ppid
        found = memo.get(cursor, cursor in marked)
        memo.update(dict.fromkeys(chain, found))
        return found

    return {pid for pid in below if member(pid)}


def in_scope(scope: Scope, below: dict[int, Proc], seen: set[int]) -> set[int]:
    """The processes of ``below`` (this process's tree) that belong to ``scope``; ``seen``
    (those found before) stays theirs even when re-parented."""
    marked = set(seen) | set(scope.members)
    if scope.root is not None and scope.root in below:
        marked.add(scope.root)
    if scope.group is not None:
        marked.update(pid for pid, proc in below.items() if proc.pgrp == scope.group)
    marked.update(_cgroup_members(scope.cgroups))
    return _closure(below, marked)


def reap_leftovers(scope: Scope, grace: float = 1.0, deadline: float = 10.0) -> ReapReport:
    """Kill and reap what is left of the launch ``scope`` names below this process, bounded
    in time; nothing outside it is touched.

    For ``grace`` seconds processes may still exit by themselves (bwrap's pid 1 reports the
    harness status before it exits, and its exit tears down the PID namespace); whatever is
    still alive after that is killed with SIGKILL, in rounds, until nothing is left.
    """
    seen: set[int] = set()

    def select_(below: dict[int, Proc]) -> set[int]:
        seen.update(in_scope(scope, below, seen))
        return seen & set(below)

    return _reap(select_, grace, deadline)


def reap_strays(keep: Iterable[int], grace: float = 0.0, deadline: float = 10.0) -> ReapReport:
    """Kill and reap every process below this one that is not a child in ``keep`` or below
    one (a long-running subreaper's orphans, left by something that has ended)."""
    kept = frozenset(keep)

    def select_(below: dict[int, Proc]) -> set[int]:
        return set(below) - _closure(below, kept & set(below))

    return _reap(select_, grace, deadline)


def _reap(
    select_: Callable[[dict[int, Proc]], set[int]], grace: float, deadline: float
) -> ReapReport:
    """The rounds both duties share: find the chosen processes below this one, kill the living
    after ``grace``, reap the zombies that are our children, until none is left."""
    report = ReapReport()
    me = os.getpid()
    start = time.monotonic()
    seen_alive: set[int] = set()
    while True:
        below = tree(me)
        found = {pid: below[pid] for pid in select_(below)}
        if not found:
            break
        now = time.monotonic()
        if now - start > grace:
            for pid, proc in found.items():
                if proc.state == "Z":
                    continue
                if pid not in seen_alive:
                    seen_alive.add(pid)
                    report.killed[proc.comm] += 1
                with contextlib.suppress(ProcessLookupError):  # ESRCH: already gone
                    os.kill(pid, signal.SIGKILL)
        for pid, proc in found.items():
            if proc.ppid != me:
                continue  # not ours to wait for (yet): its parent reaps it, or it moves to us
            with contextlib.suppress(ChildProcessError):  # ECHILD: not our direct child yet
                done, _status = os.waitpid(pid, os.WNOHANG)
                if done and pid not in seen_alive:
                    report.reaped[proc.comm] += 1
        if now - start > grace + deadline:
            report.survivors = sorted(found)
            break
        living = [pid for pid, proc in found.items() if proc.state != "Z"]
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
