"""The role's harness credential file, validated as the seed says; errors never quote it.

Host mode: ``<state>/<role>/claude-token`` is ``root:<role group>`` mode 0440, so the role can
read it but never change or replace it. Personal mode: the user's own file, no group or other
permission bits. Either way: opened ``O_NOFOLLOW|O_NONBLOCK`` (a FIFO never blocks), a regular
single-link file of at most 4098 bytes on a symlink-free path; after trailing whitespace is
dropped, 1 to 4096 printable ASCII bytes with no whitespace or control bytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

from agentc.core.errors import SupervisorError

MAX_TOKEN = 4096
MAX_FILE = MAX_TOKEN + 2  # a trailing "\r\n" is tolerated and dropped


def _fail(path: Path, why: str) -> SupervisorError:
    return SupervisorError(f"token file {path}: {why}")


def read_token(path: Path, *, mode: Literal["host", "personal"], group_gid: int | None) -> str:
    """Return the token, or raise naming the file and the rule it breaks."""
    if os.path.realpath(path) != str(path):
        raise _fail(path, "the path must be canonical and contain no symlinks")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _fail(path, "missing") from None
    except OSError as exc:
        raise _fail(path, f"cannot open ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _fail(path, "not a regular file")
        if info.st_nlink != 1:
            raise _fail(path, "has more than one hard link")
        perm = stat.S_IMODE(info.st_mode)
        if mode == "host":
            if info.st_uid != 0 or info.st_gid != group_gid or perm != 0o440:
                raise _fail(
                    path,
                    f"must be owned by root, group gid {group_gid}, mode 0440 "
                    f"(is uid {info.st_uid}, gid {info.st_gid}, mode {perm:04o})",
                )
        elif info.st_uid != os.getuid() or perm & 0o077:
            raise _fail(path, f"must be yours with no group or other access (mode {perm:04o})")
        if info.st_size > MAX_FILE:
            raise _fail(path, f"longer than {MAX_FILE} bytes")
        raw = os.read(fd, MAX_FILE + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE:
        raise _fail(path, f"longer than {MAX_FILE} bytes")
    token = raw.rstrip(b" \t\r\n\v\f")
    if not token:
        raise _fail(path, "empty")
    if len(token) > MAX_TOKEN:
        raise _fail(path, f"token longer than {MAX_TOKEN} bytes")
    if any(byte <= 0x20 or byte >= 0x7F for byte in token):
        raise _fail(path, "holds whitespace, control or non-ASCII bytes")
    return token.decode("ascii")
