"""Who is on the other end of a connection, and whether it belongs to the helper's launch.

The client's process id comes from the socket (``SO_PEERCRED``, translated to the helper's pid
namespace); its parent ids are walked in ``/proc`` up to the launch's root process. A client
whose pid or ancestry cannot be read is not from the launch (a ``hidepid`` mount of ``/proc``
therefore refuses every client: safe, but every push fails).
"""

from __future__ import annotations

import socket

from agentc.files.procs import proc_stat
from agentc.files.sockets import peer_credentials

_MAX_DEPTH = 4096


def peer_pid(conn: socket.socket) -> int:
    """The connected client's process id (0 when the kernel cannot name it here)."""
    return peer_credentials(conn).pid


def parent_of(pid: int) -> int:
    """The parent process id of ``pid``; :class:`OSError` or :class:`ValueError` if unreadable."""
    stat = proc_stat(pid)
    if stat is None:
        raise OSError(f"cannot read /proc/{pid}/stat")
    return int(stat[1][1])


def descends_from(pid: int, root: int) -> bool:
    """Whether ``pid`` is ``root`` or one of its descendants; False when anything is unreadable."""
    if pid <= 0 or root <= 0:
        return False
    for _ in range(_MAX_DEPTH):
        if pid == root:
            return True
        if pid <= 1:
            return False
        try:
            pid = parent_of(pid)
        except (OSError, ValueError, IndexError):
            return False
    return False
