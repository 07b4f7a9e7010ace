"""Per-launch resource limits: memory, processes, open files, file size, CPU share.

One launch must not starve the host. Limits are applied in the launch's child process before
it execs bwrap, so everything the launch starts inherits them:

- **rlimits**, always: open files (``RLIMIT_NOFILE``), processes (``RLIMIT_NPROC``: counted per
  user namespace, so the launch's own processes only), the largest file a launch may write
  (``RLIMIT_FSIZE``) and no core dumps.
- **a cgroup**, where the host lets us make one: cgroup v2 (a writable, delegated subtree with
  the memory and pids controllers) or, as root on a cgroup v1 host, the v1 memory and pids
  hierarchies. It bounds the launch's memory (swap included) and process count as a whole; its
  counters name the limit that was hit (``memory``, ``processes``) for the run record.
- Without a usable cgroup, memory falls back to ``RLIMIT_DATA`` per process, and
  :func:`backend_note` says so (preflight prints it).

The writable trees' size is bounded by ``RLIMIT_FSIZE`` per file and by the loop's disk checks
(``min_free_mib``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from pathlib import Path
from typing import Literal

from agentc.files.settings import Settings, integer, setting

MIB = 1024 * 1024
CGROUP_ROOT = Path("/sys/fs/cgroup")
REMOVE_SECONDS = 10.0  # how long removing a group waits for its killed processes to exit

Backend = Literal["cgroup2", "cgroup1", "rlimit"]


class Limits(Settings):
    """Per-launch limits (``[limits]`` in supervisor.toml); 0 means no limit for that resource."""

    memory_mib: int = setting(integer(minimum=0), default=8192)
    processes: int = setting(integer(minimum=0), default=1024)
    open_files: int = setting(integer(minimum=0, maximum=1 << 20), default=4096)
    file_mib: int = setting(integer(minimum=0), default=4096)
    cpu_weight: int = setting(integer(minimum=1, maximum=10000), default=100)  # cgroup v2 only


def rlimits(limits: Limits, *, with_memory: bool) -> list[tuple[int, int]]:
    """(resource, value) pairs set as both soft and hard limits in the launch's child."""
    pairs = [(resource.RLIMIT_CORE, 0)]
    if limits.open_files:
        pairs.append((resource.RLIMIT_NOFILE, limits.open_files))
    if limits.processes:
        pairs.append((resource.RLIMIT_NPROC, limits.processes))
    if limits.file_mib:
        pairs.append((resource.RLIMIT_FSIZE, limits.file_mib * MIB))
    if with_memory and limits.memory_mib:
        pairs.append((resource.RLIMIT_DATA, limits.memory_mib * MIB))
    return pairs


def _own_cgroup(version: Literal[1, 2], controller: str = "") -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if version == 2 and controllers == "" and line.startswith("0:"):
            return path
        if version == 1 and controller in controllers.split(","):
            return path
    return None


def _v2_root() -> Path | None:
    for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        controllers = root / "cgroup.controllers"
        with contextlib.suppress(OSError):
            if {"memory", "pids"} <= set(controllers.read_text().split()):
                return root
    return None


def _v2_parent() -> Path | None:
    """A writable cgroup v2 directory whose children get the memory and pids controllers."""
    root, own = _v2_root(), _own_cgroup(2)
    if root is None or own is None:
        return None
    parent = root / own.lstrip("/")
    try:
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    if {"memory", "pids"} <= enabled and os.access(parent, os.W_OK):
        return parent
    return None


def _v1_parents() -> tuple[Path, Path] | None:
    memory_own, pids_own = _own_cgroup(1, "memory"), _own_cgroup(1, "pids")
    if memory_own is None or pids_own is None:
        return None
    memory = CGROUP_ROOT / "memory" / memory_own.lstrip("/")
    pids = CGROUP_ROOT / "pids" / pids_own.lstrip("/")
    if os.access(memory, os.W_OK) and os.access(pids, os.W_OK):
        return memory, pids
    return None


def detect_backend() -> Backend:
    if _v2_parent() is not None:
        return "cgroup2"
    if _v1_parents() is not None:
        return "cgroup1"
    return "rlimit"


def backend_note(backend: Backend) -> str | None:
    """What a host without a usable cgroup does not bound (None when everything is)."""
    if backend == "rlimit":
        return (
            "no writable cgroup (v2 delegated subtree with memory and pids, or v1 as root): "
            "a launch's memory is bounded per process only (RLIMIT_DATA), not as a whole"
        )
    return None


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class LaunchLimits:
    """One launch's limits: :meth:`create` before the fork, :meth:`enter` in the child,
    :meth:`hit` after it ends (which limit ended it), :meth:`remove` at the end."""

    def __init__(self, limits: Limits, name: str, backend: Backend | None = None) -> None:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"bad cgroup name {name!r}")
        self.limits = limits
        self.name = name
        self.backend: Backend = backend or detect_backend()
        self.groups: list[Path] = []

    def _paths(self) -> list[Path]:
        """Where this launch's cgroups are (cgroup v2: one; v1: memory, then pids)."""
        if self.backend == "cgroup2":
            parent = _v2_parent()
            assert parent is not None
            return [parent / self.name]
        if self.backend == "cgroup1":
            parents = _v1_parents()
            assert parents is not None
            return [parent / self.name for parent in parents]
        return []

    def adopt(self) -> None:
        """Take over the launch's cgroups as they exist (made by a supervisor that has since
        died), so that :meth:`remove` kills what still runs in them and removes them."""
        self.groups = [group for group in self._paths() if group.is_dir()]

    def create(self) -> None:
        lim = self.limits
        if self.backend == "cgroup2":
            [group] = self._paths()
            group.mkdir(mode=0o755)
            self.groups = [group]
            if lim.memory_mib:
                _write(group / "memory.max", str(lim.memory_mib * MIB))
                with contextlib.suppress(OSError):
                    _write(group / "memory.swap.max", "0")
            if lim.processes:
                _write(group / "pids.max", str(lim.processes))
            with contextlib.suppress(OSError):
                _write(group / "cpu.weight", str(lim.cpu_weight))
        elif self.backend == "cgroup1":
            memory, pids = self._paths()
            memory.mkdir(mode=0o755)
            self.groups = [memory]
            pids.mkdir(mode=0o755)
            self.groups.append(pids)
            if lim.memory_mib:
                _write(memory / "memory.limit_in_bytes", str(lim.memory_mib * MIB))
                with contextlib.suppress(OSError):  # absent when swap accounting is off
                    _write(memory / "memory.memsw.limit_in_bytes", str(lim.memory_mib * MIB))
            if lim.processes:
                _write(pids / "pids.max", str(lim.processes))

    def enter(self) -> None:
        """In the launch's child, before exec: join the cgroups, set the rlimits.

        The child is single-threaded (it was just forked), so moving its one thread moves the
        process. On cgroup v1 it writes ``0`` (itself) to ``tasks``: the kernel then skips the
        global lock that a ``cgroup.procs`` write takes, whose RCU grace period cost ~8 ms per
        controller on an otherwise idle host (measured in docs/benchmarks.md). cgroup v2 has
        no such path for a domain group: it writes ``cgroup.procs``.
        """
        member = "tasks" if self.backend == "cgroup1" else "cgroup.procs"
        for group in self.groups:
            _write(group / member, "0")
        for which, value in rlimits(self.limits, with_memory=self.backend == "rlimit"):
            resource.setrlimit(which, (value, value))

    def hit(self) -> str | None:
        """The limit the launch ran into, if its cgroup counted one (``memory``/``processes``)."""
        for group in self.groups:
            if self._count(group / "memory.events", "oom_kill") or self._failcnt(group):
                return "memory"
            if self._count(group / "pids.events", "max"):
                return "processes"
        return None

    @staticmethod
    def _count(path: Path, key: str) -> int:
        with contextlib.suppress(OSError, ValueError):
            for line in path.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        return 0

    @staticmethod
    def _failcnt(group: Path) -> int:
        if not (group / "memory.oom_control").exists():
            return 0
        return LaunchLimits._count(group / "memory.oom_control", "oom_kill")

    def remove(self) -> None:
        """Remove the cgroups once every process in them is gone: kill what is left, wait
        (at most :data:`REMOVE_SECONDS`) for it to exit, and only then remove the group.

        A killed process leaves its cgroup only when it has exited, which on a busy host may
        take longer than a few yields: until then it still runs its exit path (and still shows
        in ``/proc``), so giving up early would let a launch's process outlive its end.
        """
        deadline = time.monotonic() + REMOVE_SECONDS
        for group in self.groups:
            pause = 0.0
            while True:
                _kill_members(group)
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        break
                if pause:
                    time.sleep(pause)
                else:
                    os.sched_yield()
                pause = min(0.05, pause * 2 or 0.0005)
        self.groups = []


def _kill_members(group: Path) -> None:
    with contextlib.suppress(OSError):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)


def remove_left(limits: Limits, *names: str) -> None:
    """Kill whatever still runs in the named launch cgroups and remove them: what a launch
    left when its supervisor died. A launch started in the instant before the crash has no
    pid on record, yet may run; its cgroup, named after its launch id, holds it."""
    for name in names:
        left = LaunchLimits(limits, name)
        left.adopt()
        left.remove()
