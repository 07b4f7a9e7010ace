"""The role's harness credential file, validated as the seed says; errors never quote it.

Host mode: ``<state>/<role slug>/claude-token`` is ``root:<role group>`` mode 0440, so the role
can read it but never change or replace it. Personal mode: the user's own file, no group or
other permission bits. Either way it is read with :func:`agentc.files.read_private` (opened
``O_NOFOLLOW|O_NONBLOCK``, so a FIFO never blocks): a regular single-link file of at most 4098
bytes on a symlink-free path; after trailing whitespace is dropped, 1 to 4096 printable ASCII
bytes with no whitespace or control bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.core.roles import Mode
from agentc.files import UnsafeFile, read_private

MAX_TOKEN = 4096
MAX_FILE = MAX_TOKEN + 2  # a trailing "\r\n" is tolerated and dropped


def _fail(path: Path, why: str) -> SupervisorError:
    return SupervisorError(f"token file {path}: {why}")


def read_token(path: Path, *, mode: Mode, group_gid: int | None) -> str:
    """Return the token, or raise naming the file and the rule it breaks."""
    try:
        if mode == "host":
            # root:<role group> 0440; an unknown role group matches no file (no gid is -1).
            group = -1 if group_gid is None else group_gid
            raw = read_private(
                path,
                max_bytes=MAX_FILE,
                canonical=True,
                owner_uid=0,
                group_gid=group,
                exact_mode=0o440,
            )
        else:
            raw = read_private(path, max_bytes=MAX_FILE, canonical=True, owner_uid=os.getuid())
    except UnsafeFile as exc:
        raise _fail(path, exc.reason) from None
    token = raw.rstrip(b" \t\r\n\v\f")
    if not token:
        raise _fail(path, "empty")
    if len(token) > MAX_TOKEN:
        raise _fail(path, f"token longer than {MAX_TOKEN} bytes")
    if any(byte <= 0x20 or byte >= 0x7F for byte in token):
        raise _fail(path, "holds whitespace, control or non-ASCII bytes")
    return token.decode("ascii")
