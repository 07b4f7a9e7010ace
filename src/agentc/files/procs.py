"""Starting other programs: one that runs apart from its starter (the push helper beside a
launch, the programs ``agentc up`` runs), and a short check whose answer is awaited (the
preflight's probes, the sign-in check)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import IO


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
