"""One process at a time: an exclusive advisory lock (``flock``) on a file, held for as long as
its descriptor stays open (a process that dies, even by SIGKILL, lets go of it), and who holds
one, read from the kernel's own table (``/proc/locks``) rather than from a pid written down, so a
stale pid or a reused one never passes for the holder.

:func:`hold` takes a lock if it is free, :func:`wait` waits for it, :func:`locked` holds it
(or waits for it) for a ``with`` block, and :func:`held` asks whether another process holds a
lock (a running launch's directory, a running service) without keeping it. Every lock file is
created mode 0600 and never opened through a link."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def _take(path: Path, operation: int) -> int | None:
    fd = os.open(path, _FLAGS, 0o600)
    try:
        fcntl.flock(fd, operation)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def hold(path: Path) -> int | None:
    """An exclusive lock on ``path``: the descriptor to keep open while it is held, or None
    when another process holds it (never waited for)."""
    return _take(path, fcntl.LOCK_EX | fcntl.LOCK_NB)


def wait(path: Path, *, shared: bool = False) -> int:
    """The lock on ``path`` (``shared`` with other readers, else exclusive), once every other
    holder let go: the descriptor to keep open while it is held."""
    fd = _take(path, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    assert fd is not None  # a blocking flock never reports EWOULDBLOCK
    return fd


@contextlib.contextmanager
def locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """:func:`wait` for the lock on ``path`` and hold it for the ``with`` block."""
    fd = wait(path, shared=shared)
    try:
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def holding(path: Path) -> Iterator[bool]:
    """:func:`hold` the lock on ``path`` for the ``with`` block: True when it is held, False
    when another process holds it (nothing waits)."""
    fd = hold(path)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)


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
