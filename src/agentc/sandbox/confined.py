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
import os
import subprocess
from collections.abc import Mapping
from typing import IO

from agentc.sandbox import reaper
from agentc.sandbox.bwrap import LaunchDescription, build_argv
from agentc.sandbox.limits import LaunchLimits


def spawn(
    desc: LaunchDescription,
    filter_fd: int,
    limits: LaunchLimits,
    output: int | IO[bytes],
    env: Mapping[str, str],
) -> subprocess.Popen[bytes]:
    """Start the sandbox; ``filter_fd`` (the sealed syscall filter) is closed here whatever
    happens. Raises OSError when it cannot start."""
    try:
        argv = build_argv(dataclasses.replace(desc, seccomp_fd=filter_fd))

        def child() -> None:
            reaper.child_setup()
            os.set_inheritable(filter_fd, True)
            limits.enter()

        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd="/",
            close_fds=True,
            pass_fds=(filter_fd,),
            preexec_fn=child,
            process_group=0,
        )
    finally:
        os.close(filter_fd)
