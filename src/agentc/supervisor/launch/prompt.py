"""The prompt as a sealed memfd: what the agent was told, frozen and provable.

The harness reads its prompt on stdin from a Linux memfd whose write, grow, shrink and seal
changes are disabled, so neither the harness nor anything it starts can rewrite the prompt
(reopening ``/proc/self/fd/0`` for writing yields a descriptor whose writes fail). The host's
``prompt.md`` descriptor is closed before spawn. The SHA-256 of the exact bytes is returned so
the launch can record it in the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.files import UnsafeFile, read_private

MAX_PROMPT_BYTES = 16 * 1024 * 1024
SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


@dataclass
class SealedPrompt:
    """An open, sealed memfd positioned at offset 0, and the SHA-256 of its bytes."""

    fd: int
    sha256: str
    size: int
    closed: bool = False

    def close(self) -> None:
        """Close once: a second close could hit an unrelated descriptor reusing the number."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                os.close(self.fd)


def read_prompt_file(path: Path) -> bytes:
    """Read a regular, single-link prompt file without following a symlink; at most 16 MiB."""
    try:
        return read_private(path, max_bytes=MAX_PROMPT_BYTES, private=False)
    except UnsafeFile as exc:
        if exc.missing:
            raise SupervisorError(f"{path}: the prompt file is missing") from None
        raise SupervisorError(
            f"{path}: the prompt file is refused: {exc.reason} (a prompt is a regular "
            "single-link file of at most 16 MiB)"
        ) from None


def seal_prompt(data: bytes) -> SealedPrompt:
    """Copy ``data`` into a new memfd and seal it; refuse oversized or unsealable prompts."""
    if len(data) > MAX_PROMPT_BYTES:
        raise SupervisorError("the prompt is larger than 16 MiB")
    try:
        fd = os.memfd_create("agentc-prompt", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (OSError, AttributeError) as exc:
        raise SupervisorError(f"cannot create a sealable memfd for the prompt ({exc})") from None
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.lseek(fd, 0, os.SEEK_SET)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
            raise SupervisorError("the prompt memfd did not keep its seals")
    except OSError as exc:
        os.close(fd)
        raise SupervisorError(f"cannot seal the prompt memfd ({exc.strerror})") from None
    except SupervisorError:
        os.close(fd)
        raise
    return SealedPrompt(fd=fd, sha256=hashlib.sha256(data).hexdigest(), size=len(data))
