"""Starting a program that runs apart from its starter: the push helper beside a launch, the
programs ``agentc up`` runs."""

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
