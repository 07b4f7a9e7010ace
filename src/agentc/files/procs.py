"""Starting other programs: one that runs apart from its starter (the push helper beside a
launch, the programs ``agentc up`` runs), and a short check whose answer is awaited (the
preflight's probes, the sign-in check); a child that must not outlive its parent; and what
``/proc/<pid>/stat`` says of a process.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable
from typing import IO

PR_SET_PDEATHSIG = 1
# The PATH a program run as another account, or by root, is given: the system's directories
# only, never the caller's (which another user may have put a directory of theirs on).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def system_env(**more: str) -> dict[str, str]:
    """A minimal environment for a system tool: :data:`SYSTEM_PATH`, a UTF-8 C locale and
    ``more``."""
    return {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", **more}


def start_detached(
    argv: list[str],
    env: dict[str, str],
    log: IO[bytes],
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own (so its own process group: one signal reaches
    all it starts), at ``/`` with no stdin, its output and errors appended to ``log``."""
    return subprocess.Popen(
        argv,
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )


def run_check(
    argv: list[str],
    *,
    env: dict[str, str],
    timeout: float,
    cwd: str = "/",
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a short check program and wait for it: the environment given (never this
    process's), no stdin, its output and errors captured as text (UTF-8, undecodable bytes
    replaced), at most ``timeout`` seconds. Raises ``subprocess.TimeoutExpired`` or
    ``OSError`` as `subprocess.run` does; a non-zero exit is the caller's to judge."""
    return subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        preexec_fn=preexec_fn,
        check=False,
    )


def ask_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """Have the kernel send ``sig`` to this process when its parent exits."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")


def dies_with(parent: int, sig: int) -> bool:
    """In a child of ``parent`` (its pid, read before the fork): have the kernel send ``sig``
    when the parent exits, and say whether the parent is still there. False means it exited
    before the request took hold, so no signal will ever come: the child must not go on."""
    ask_parent_death_signal(sig)
    return os.getppid() == parent


def proc_stat(pid: int) -> tuple[str, list[str]] | None:
    """``/proc/<pid>/stat``: the command name (it may hold spaces and parentheses: it ends at the
    last ``)``) and the fields after it, the state first; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    head, _, tail = raw.rpartition(")")
    return head.partition("(")[2], tail.split()


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``/proc/<pid>/stat``), or
    None when it is gone or a zombie. With the pid it names a process for good: a reused pid
    has a later start time."""
    stat = proc_stat(pid)
    if stat is None or not stat[1] or stat[1][0] in ("Z", "X"):
        return None
    try:
        return int(stat[1][19])
    except (IndexError, ValueError):
        return None
