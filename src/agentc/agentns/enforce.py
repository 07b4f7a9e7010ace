"""Userspace budget enforcement on a kernel without ``PR_SET_AGENT_BUDGET_LIMITS``.

* ``wall``: a detached watchdog (double fork, so the command keeps the launcher's pid and never
  sees an extra child) follows the command's process tree through ``/proc`` and, at the
  deadline, sends SIGTERM to every process in it, then SIGKILL after a grace period.
* ``fork``: ``RLIMIT_NPROC`` set to the tasks the real uid has now plus ``fork``. The kernel does
  not apply that limit to root or to a holder of CAP_SYS_ADMIN / CAP_SYS_RESOURCE, in which case
  the key is reported unenforced.
* ``syscalls`` and ``write_bytes`` have no userspace equivalent: always reported unenforced.

Tracking limits: processes are identified by (pid, start time) so a reused pid is never
signalled; a process that forks and orphans a child between two scans (every 0.25 s) escapes.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from agentc.agentns.budget import Budget
from agentc.agentns.errors import UsageError

TICK_S = 0.25
DEFAULT_GRACE_S = 5.0
ENV_GRACE = "AGENTNS_WALL_GRACE"  # seconds between SIGTERM and SIGKILL (tests shorten it)

_CAP_SYS_ADMIN = 21
_CAP_SYS_RESOURCE = 24
UNENFORCEABLE = {
    "syscalls": "no userspace syscall counter; needs PR_SET_AGENT_BUDGET_LIMITS",
    "write_bytes": "no userspace write-byte counter; needs PR_SET_AGENT_BUDGET_LIMITS",
}


@dataclass(frozen=True)
class Plan:
    """Which given keys will be enforced, and why the others will not."""

    enforced: tuple[str, ...]
    unenforced: dict[str, str]


class Proc(NamedTuple):
    """A process identity that survives pid reuse."""

    pid: int
    start: int


class _Stat(NamedTuple):
    ppid: int
    start: int
    state: str


def _read_stat(pid: int) -> _Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return _Stat(ppid=int(rest[1]), start=int(rest[19]), state=rest[0].decode())
    except (IndexError, ValueError):
        return None


def _scan() -> dict[int, _Stat]:
    table: dict[int, _Stat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _read_stat(int(name))
            if st is not None:
                table[int(name)] = st
    return table


def live_tree(tracked: Iterable[Proc]) -> dict[Proc, str]:
    """Still-running tracked processes plus all their current descendants, with their state."""
    table = _scan()
    live: dict[Proc, str] = {}
    for p in tracked:
        st = table.get(p.pid)
        if st is not None and st.start == p.start and st.state != "Z":
            live[p] = st.state
    children: dict[int, list[int]] = {}
    for pid, st in table.items():
        children.setdefault(st.ppid, []).append(pid)
    queue = [p.pid for p in live]
    me = os.getpid()  # the watchdog may briefly descend from the root (via its helper fork)
    while queue:
        for child in children.get(queue.pop(), ()):
            if child == me:
                continue
            st = table[child]
            proc = Proc(child, st.start)
            if st.state != "Z" and proc not in live:
                live[proc] = st.state
                queue.append(child)
    return live


def _signal(p: Proc, sig: int) -> None:
    # A pidfd pins the process: after checking its start time, the signal cannot hit a reuse.
    try:
        fd = os.pidfd_open(p.pid)
    except OSError:
        return  # ESRCH: already gone
    try:
        st = _read_stat(p.pid)
        if st is not None and st.start == p.start:
            signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass  # exited between the check and the signal
    finally:
        os.close(fd)


def _say(msg: str) -> None:
    try:
        os.write(2, f"[agentns-claude] {msg}\n".encode())
    except OSError:
        pass  # stderr closed: nothing to tell


def terminate_tree(tracked: Iterable[Proc], grace_s: float) -> None:
    """SIGTERM the whole tree, wait up to ``grace_s``, then freeze and SIGKILL what is left."""
    live = live_tree(tracked)
    for p in live:
        _signal(p, signal.SIGTERM)
        _signal(p, signal.SIGCONT)  # a stopped process only acts on SIGTERM once continued
    end = time.monotonic() + grace_s
    while live and time.monotonic() < end:
        time.sleep(0.05)
        live = live_tree(live)
    if not live:
        return
    _say(f"budget: wall grace {grace_s:g}s over; SIGKILL to {len(live)} processes")
    # Freeze first: a stopped process cannot fork and its children stay attached to it, so the
    # tree is complete before the first SIGKILL reparents anything out of sight.
    live = _signal_rounds(
        live, signal.SIGSTOP, 0.01, lambda t: [p for p, s in t.items() if s not in "Tt"]
    )
    _signal_rounds(live, signal.SIGKILL, 0.02, list)


def _signal_rounds(
    live: dict[Proc, str],
    sig: int,
    pause: float,
    targets: Callable[[dict[Proc, str]], list[Proc]],
) -> dict[Proc, str]:
    """Up to 100 rounds: send ``sig`` to the ``targets`` of the tree, until there are none."""
    for _ in range(100):
        chosen = targets(live)
        if not chosen:
            break
        for p in chosen:
            _signal(p, sig)
        time.sleep(pause)
        live = live_tree(live)
    return live


def _watch(root: Proc, deadline: float, wall_s: int, grace_s: float) -> None:
    tracked: dict[Proc, str] = {root: "R"}
    try:
        root_fd: int | None = os.pidfd_open(root.pid)
    except OSError:
        root_fd = None
    import select  # only the watchdog needs it

    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        tracked = live_tree(tracked)
        if not tracked:
            return  # the whole session ended on its own
        wait = min(TICK_S, deadline - now)
        if root_fd is not None:
            # Readable when the root exits: a fast exit is noticed at once, not a tick later.
            if select.select([root_fd], [], [], wait)[0]:
                os.close(root_fd)
                root_fd = None
        else:
            time.sleep(wait)
    tracked = live_tree(tracked)
    if tracked:
        _say(f"budget: wall={wall_s}s exceeded; SIGTERM to {len(tracked)} processes")
        terminate_tree(tracked, grace_s)


def _detach_stdio() -> None:
    # Keep only stderr (for the kill notice); every other inherited descriptor would hold a
    # caller's pipe open and delay its EOF until the watchdog ends.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 1024)


def start_wall_watchdog(wall_s: int, grace_s: float) -> None:
    """Fork a detached watchdog for this process (which is about to exec the command)."""
    me = os.getpid()
    st = _read_stat(me)
    if st is None:
        raise OSError(f"cannot read /proc/{me}/stat")
    root = Proc(me, st.start)
    deadline = time.monotonic() + wall_s
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        # Intermediate child: fork the watchdog and exit, so the watchdog is reparented away and
        # the command never has an unexpected child of its own. Nothing here may return into
        # the launcher's code path (that would exec the command twice).
        code = 0
        try:
            if os.fork() == 0:
                os.setsid()  # out of the terminal's process group: no Ctrl-C, no SIGHUP
                for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
                    signal.signal(sig, signal.SIG_IGN)
                _detach_stdio()
                _watch(root, deadline, wall_s, grace_s)
        except BaseException:  # a forked child must end here, whatever happens
            code = 1
        os._exit(code)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # ECHILD: the caller left SIGCHLD ignored, so the kernel reaped it already


def grace_from_env(env: Mapping[str, str]) -> float:
    """The SIGTERM-to-SIGKILL grace, from ``AGENTNS_WALL_GRACE`` (seconds) or the default."""
    value = env.get(ENV_GRACE)
    if not value:
        return DEFAULT_GRACE_S
    try:
        grace = float(value)
    except ValueError:
        grace = -1.0
    if not 0 <= grace <= 3600:  # also rejects nan
        raise UsageError(f'{ENV_GRACE}="{value}": expected seconds between 0 and 3600')
    return grace


def _kernel_uid(uid: int) -> int | None:
    try:
        with open("/proc/self/uid_map", encoding="ascii") as f:
            for line in f:
                inside, outside, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    return outside + uid - inside
    except (OSError, ValueError):
        return None
    return None


def _in_init_userns() -> bool:
    try:
        with open("/proc/self/uid_map", encoding="ascii") as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def _cap_eff() -> int:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def nproc_exemption() -> str | None:
    """Why RLIMIT_NPROC would not bind this process, or ``None`` if it would."""
    # kernel/fork.c skips the check for the init user (kuid 0) and for tasks capable() of
    # CAP_SYS_ADMIN or CAP_SYS_RESOURCE in the initial user namespace.
    kuid = _kernel_uid(os.getuid())
    if kuid is None or kuid == 0:
        return "the real uid is root, which RLIMIT_NPROC does not limit"
    caps = _cap_eff()
    if _in_init_userns() and caps & ((1 << _CAP_SYS_ADMIN) | (1 << _CAP_SYS_RESOURCE)):
        return "CAP_SYS_ADMIN/CAP_SYS_RESOURCE bypass RLIMIT_NPROC"
    return None


def plan_budget(budget: Budget) -> Plan:
    """Decide, before anything runs, which of the given keys can be enforced here."""
    enforced: list[str] = []
    unenforced: dict[str, str] = {}
    for key in budget.given():
        if key == "wall":
            enforced.append(key)
        elif key == "fork":
            reason = nproc_exemption()
            if reason is None:
                enforced.append(key)
            else:
                unenforced[key] = reason
        else:
            unenforced[key] = UNENFORCEABLE[key]
    return Plan(tuple(enforced), unenforced)


def _user_tasks(uid: int) -> int:
    """Tasks (threads count, as for RLIMIT_NPROC) whose real uid is ``uid``."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        real = threads = -1
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        real = int(line.split()[1])
                    elif line.startswith("Threads:"):
                        threads = int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # exited while scanning
        if real == uid and threads > 0:
            total += threads
    return total


def apply_fork_limit(fork: int) -> int:
    """Cap RLIMIT_NPROC at the user's current tasks plus ``fork``; return the limit set."""
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    # RLIM_INFINITY is -1 in Python; anything at or above 2**63 would read as negative too.
    limit = min(_user_tasks(os.getuid()) + fork, 2**63 - 1)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    # Soft and hard alike, so the command cannot raise it back.
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    return limit
