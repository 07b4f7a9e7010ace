"""Whether a lock file is held: the one test of an advisory ``flock`` another process may hold
(a running launch's directory lock, a running service's lock)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def held(path: Path) -> bool:
    """Whether another open file description holds ``path``'s exclusive lock (a missing or
    unopenable file, or a symlink, is not held: nothing follows it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
