"""Replace a file atomically and durably: temporary file, fsync, rename, fsync of the directory.

A reader sees the old content or the new, never a half-written file, and a crash after the call
returns cannot lose the new content. The temporary file is created ``O_EXCL`` beside the target
with the final mode, and removed if anything fails.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600, dir_fd: int | None = None) -> None:
    """Write ``data`` to ``path`` (a bare name when ``dir_fd`` is given) atomically and durably."""
    name = os.fspath(path)
    parent = os.path.dirname(name) if dir_fd is None else ""
    base = os.path.basename(name)
    tmp = os.path.join(parent, f".{base}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, mode)  # the umask must not widen or narrow the final mode
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    _fsync_dir(parent or ".", dir_fd)


def _fsync_dir(parent: str, dir_fd: int | None) -> None:
    if dir_fd is not None:
        os.fsync(dir_fd)
        return
    dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
