"""Unix sockets every program shares: long paths, and who is on the other end.

A socket's path grows with where the user keeps the state (a project under a home easily
passes the 108 bytes of ``sun_path``). Such a socket is bound and connected to as
``/proc/self/fd/<fd>/<name>``, where ``<fd>`` is an ``O_PATH`` descriptor of its directory held
while the path is in use: the kernel resolves the magic link to the directory, so only the name
must be short. No shorter stand-in path (a directory under ``/tmp``) is ever needed, which
another account could create first.

:func:`peer_credentials` is the kernel's word (``SO_PEERCRED``) on the process that connected:
a local program cannot claim another account's uid.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
from collections.abc import Iterator
from typing import NamedTuple

# sun_path is 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
# A socket whose path is longer is reached as /proc/self/fd/<dir fd>/<name>: only its name
# must fit after this prefix.
PROC_FD_PREFIX_BYTES = len("/proc/self/fd/2147483647/")
_UCRED = struct.Struct("3i")


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


def name_fits(path: str) -> bool:
    """Whether :func:`sun_path` can name ``path``: it fits, or its last component does."""
    name = os.path.basename(path)
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES:
        return True
    return 0 < len(os.fsencode(name)) <= MAX_SOCKET_PATH_BYTES - PROC_FD_PREFIX_BYTES


class PeerCredentials(NamedTuple):
    """The connecting process as the kernel recorded it at ``connect`` (this pid namespace's
    view: 0 when the kernel cannot name the pid here)."""

    pid: int
    uid: int
    gid: int


def peer_credentials(conn: socket.socket) -> PeerCredentials:
    """``SO_PEERCRED`` of a connected Unix socket. OSError on any other socket: Linux answers
    a TCP socket too, with uid 65534 (nobody), which must never pass for an account."""
    if conn.family != socket.AF_UNIX:
        raise OSError(errno.EPROTOTYPE, "only a Unix socket names its peer")
    pid, uid, gid = _UCRED.unpack(
        conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    )
    return PeerCredentials(int(pid), int(uid), int(gid))
