"""One process at a time: an exclusive advisory lock (``flock``) on a file, held for as long as
its descriptor stays open (a process that dies, even by SIGKILL, lets go of it), and who holds
one, read from the kernel's own table (``/proc/locks``) rather than from a pid written down, so a
stale pid or a reused one never passes for the holder.

:func:`held` asks whether another process holds a lock (a running launch's directory,
a running service) without keeping it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def hold(path: Path) -> int | None:
    """An exclusive lock on ``path`` (created 0600, never through a link): the descriptor to
    keep open while it is held, or None when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def holder(path: Path) -> int | None:
    """The pid of the process holding a lock on ``path``, None when none does (or the kernel's
    table cannot be read)."""
    try:
        info = os.stat(path, follow_symlinks=False)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()  # 1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:  # "->": a waiter
            continue
        try:
            major, minor, inode = fields[5].split(":")
            same = (int(major, 16), int(minor, 16), int(inode)) == (
                os.major(info.st_dev),
                os.minor(info.st_dev),
                info.st_ino,
            )
            if same:
                return int(fields[4])
        except ValueError:
            continue
    return None


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
