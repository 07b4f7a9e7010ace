"""Read a private file (a token, a credential, a prompt) without trusting the path.

The rule, written once: opened ``O_NOFOLLOW|O_NONBLOCK`` (a symlink is refused, a FIFO never
blocks), then checked on the open descriptor with ``fstat``: a regular file, at most one hard
link, owned as the caller requires, no group or other permission bits unless the caller allows
them, and at most ``max_bytes`` long (read one byte past the limit, so a file growing after
``fstat`` is refused too). A refusal raises :class:`UnsafeFile` whose ``reason`` names the rule
broken and never quotes the content; callers wrap it in their own error with their own prefix.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.files.regular import READ_FLAGS

_READ_CHUNK = 1 << 20


class UnsafeFile(AgentcError):
    """A file refused by :func:`read_private`; ``reason`` says why, ``missing`` if absent."""

    def __init__(self, path: Path, reason: str, *, missing: bool = False) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.missing = missing


def read_private(
    path: Path,
    *,
    max_bytes: int,
    owner_uid: int | None = None,
    group_gid: int | None = None,
    exact_mode: int | None = None,
    single_link: bool = True,
    canonical: bool = False,
    private: bool = True,
) -> bytes:
    """Return the file's bytes, or raise :class:`UnsafeFile` naming the rule it breaks.

    ``owner_uid`` defaults to the effective uid. With ``exact_mode`` the permission bits must be
    exactly that (and the group ``group_gid`` when given: the host-mode ``root:<group> 0440``
    rule); without it, no group or other bit may be set. ``canonical`` refuses a path that is not
    already canonical (a symlink in any component). ``private=False`` skips the owner and mode
    checks, for a file that is not secret but must still be read safely (a prompt).
    """
    uid = os.geteuid() if owner_uid is None else owner_uid
    if canonical and os.path.realpath(path) != str(path):
        raise UnsafeFile(path, "the path must be canonical and contain no symlinks")
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        raise UnsafeFile(path, "missing", missing=True) from None
    except OSError as exc:
        raise UnsafeFile(path, f"cannot open ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(path, "not a regular file")
        if single_link and info.st_nlink != 1:
            raise UnsafeFile(path, "has more than one hard link")
        problem = _owner_problem(info, uid, group_gid, exact_mode) if private else None
        if problem is not None:
            raise UnsafeFile(path, problem)
        too_long = f"longer than {max_bytes} bytes"
        if info.st_size > max_bytes:
            raise UnsafeFile(path, too_long)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, min(_READ_CHUNK, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise UnsafeFile(path, too_long)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _owner_problem(
    info: os.stat_result, uid: int, group_gid: int | None, exact_mode: int | None
) -> str | None:
    """Why the file's owner, group or mode breaks the rule, or None."""
    perm = stat.S_IMODE(info.st_mode)
    if exact_mode is not None:
        if (
            info.st_uid != uid
            or perm != exact_mode
            or (group_gid is not None and info.st_gid != group_gid)
        ):
            group = f", group gid {group_gid}" if group_gid is not None else ""
            who = "root" if uid == 0 else f"uid {uid}"
            return (
                f"must be owned by {who}{group}, mode {exact_mode:04o} "
                f"(is uid {info.st_uid}, gid {info.st_gid}, mode {perm:04o})"
            )
        return None
    if info.st_uid != uid:
        return f"must be yours with no group or other access (owned by uid {info.st_uid})"
    if perm & 0o077:
        return f"must be yours with no group or other access (mode {perm:04o})"
    return None
