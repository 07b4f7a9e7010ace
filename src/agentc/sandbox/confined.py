"""Start one command in a sandbox that is not a harness launch: the integrator's checks and a
project's setup command.

Both start the same way: the description's bwrap argv with the syscall filter handed over as
an inherited descriptor, the launch limits joined in the child before exec (so nothing of it
runs outside them), every descriptor above 2 closed, output to one file, in a process group of
its own (so a timeout kills all of it). The harness launch itself has more to arrange (markers,
the sealed prompt, relays) and starts through :mod:`agentc.supervisor.launch.execute`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Mapping
from typing import IO

from agentc.sandbox import reaper
from agentc.sandbox.bwrap import LaunchDescription, build_argv
from agentc.sandbox.limits import LaunchLimits


class SandboxInfo:
    """What bwrap tells of a sandbox it made (``--info-fd``): the pid of the sandbox's init
    (pid 1 inside). bwrap starts it in a session of its own, so the launch's process group
    does not hold it; bwrap exits as soon as the init reports the command's status, and the
    init, re-parented to the subreaper while it dies, is known by this pid
    (:class:`agentc.sandbox.reaper.Scope` ``members``)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._pid: int | None = None

    def spawned(self) -> None:
        """bwrap has its copy of the write end (or did not start): ours is closed."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def init_pid(self) -> int | None:
        """The init's pid, once bwrap wrote it (read without waiting; None before that, or
        when bwrap never made the sandbox)."""
        if self._pid is None and self.read_fd >= 0:
            data = b""
            try:
                while chunk := os.read(self.read_fd, 4096):
                    data += chunk
            except BlockingIOError:
                pass
            try:
                pid = json.loads(data).get("child-pid")
            except (ValueError, AttributeError):
                pid = None
            self._pid = pid if isinstance(pid, int) and pid > 1 else None
        return self._pid

    def members(self) -> tuple[int, ...]:
        """The init's pid for a reaping scope (none when it is not known)."""
        pid = self.init_pid()
        return (pid,) if pid is not None else ()

    def close(self) -> None:
        self.spawned()
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1


def spawn(
    desc: LaunchDescription,
    filter_fd: int,
    limits: LaunchLimits,
    output: int | IO[bytes],
    env: Mapping[str, str],
    info: SandboxInfo | None = None,
) -> subprocess.Popen[bytes]:
    """Start the sandbox; ``filter_fd`` (the sealed syscall filter) is closed here whatever
    happens. With ``info``, bwrap writes the sandbox's init pid there. Raises OSError when it
    cannot start."""
    info_fd = info.write_fd if info is not None else None
    passed = (filter_fd,) if info_fd is None else (filter_fd, info_fd)
    try:
        argv = build_argv(dataclasses.replace(desc, seccomp_fd=filter_fd, info_fd=info_fd))

        def child() -> None:
            reaper.child_setup()
            for fd in passed:
                os.set_inheritable(fd, True)
            limits.enter()

        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd="/",
            close_fds=True,
            pass_fds=passed,
            preexec_fn=child,
            process_group=0,
        )
    finally:
        os.close(filter_fd)
        if info is not None:
            info.spawned()
