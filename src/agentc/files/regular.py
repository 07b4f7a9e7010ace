"""Read a file someone else may have written (a launch's run files, a command's log) without
trusting the path.

The rule, written once: opened ``O_NOFOLLOW|O_NONBLOCK`` (a symlink is refused, a FIFO never
blocks), then a regular file by ``fstat`` on the open descriptor; a missing file, a link or
anything not a regular file raises ``OSError``. :func:`agentc.files.read_private` opens with the
same flags and checks more (owner, mode, links, size) for a secret.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(path: Path) -> BinaryIO:
    """The regular file at ``path`` open for reading in binary; OSError if it is not one."""
    handle = os.fdopen(os.open(path, READ_FLAGS), "rb")
    try:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
    except BaseException:
        handle.close()
        raise
    return handle


def read_tail(path: Path, limit: int) -> bytes:
    """The last ``limit`` bytes of the regular file at ``path`` (:func:`open_regular`)."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(max(0, size - limit))
        return handle.read(limit)
