"""Reaching a Unix socket whose path does not fit in ``sun_path`` (108 bytes).

A launch's relay sockets live in its run directory, whose path grows with where the user keeps
the state (a project under a home easily passes 108 bytes). Such a socket is bound and
connected to as ``/proc/self/fd/<fd>/<name>``, where ``<fd>`` is an ``O_PATH`` descriptor of
its directory held while the path is in use: the kernel resolves the magic link to the
directory, so only the name must be short (addresses.check_socket_path ``via_directory``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from agentc.supervisor.net.addresses import MAX_SOCKET_PATH_BYTES


@contextlib.contextmanager
def sun_path(path: str) -> Iterator[str]:
    """A ``sun_path`` naming ``path``: itself when it fits, else through its directory."""
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES:
        yield path
        return
    parent, name = os.path.split(path)
    fd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)
