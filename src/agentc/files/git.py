"""The one way the project runs git: :func:`run_git`, with the hardened environment
:func:`git_env` builds.

The environment is fixed (PATH, HOME, ``LANG``/``LC_ALL``, no system or global configuration,
no terminal prompts; ``GIT_SSH_COMMAND`` when an ssh key is given); git gets no input, its
output is captured, a timeout bounds it, and a failure raises the caller's own error naming the
subcommand. The push helper, the integrator, the supervisor loop and ``agentc up`` run git on
the host this way; the agent CLI runs it the same way in the agent's own environment.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from agentc.files.procs import SYSTEM_PATH

Out = TypeVar("Out", str, bytes)


def git_env(ssh_key: Path | None = None, known_hosts: Path | None = None) -> dict[str, str]:
    """The whole environment git runs with. With an ssh key, ssh uses that key alone, never
    asks, and checks the remote's host key strictly against ``known_hosts`` (default: the
    account's ``~/.ssh/known_hosts``)."""
    env = {
        "PATH": os.environ.get("PATH", SYSTEM_PATH),
        "HOME": os.environ.get("HOME", "/nonexistent"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
    }
    if ssh_key is not None:
        command = f"ssh -i {shlex.quote(str(ssh_key))} -o IdentitiesOnly=yes -o BatchMode=yes"
        command += " -o StrictHostKeyChecking=yes"
        if known_hosts is not None:
            command += f" -o UserKnownHostsFile={shlex.quote(str(known_hosts))}"
        env["GIT_SSH_COMMAND"] = command
    return env


def run_git(
    argv: list[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    timeout: float,
    fail: Callable[[str], Exception],
    detail: Callable[[Out], str],
    *,
    check: bool = True,
    text: bool = False,
) -> subprocess.CompletedProcess[Out]:
    """Run ``argv`` (``git`` and its arguments) in ``cwd`` (None: this process's) with no input
    and ``env`` (None: this process's own, for the agent CLI in the agent's environment),
    its output captured (decoded, errors replaced, when ``text``: then ``detail`` takes
    ``str``, else ``bytes``). A timeout, a git that cannot start, or (with ``check``) a failure
    raises ``fail(message)``, the message naming the subcommand and, for a failure,
    ``detail(stderr)``."""
    what = _subcommand(argv)
    try:
        done: subprocess.CompletedProcess[Out] = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=text,
            errors="replace" if text else None,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise fail(f"git {what} did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise fail(f"cannot run git: {exc}") from None
    if check and done.returncode != 0:
        raise fail(f"git {what} failed: {detail(done.stderr)}")
    return done


def _subcommand(argv: list[str]) -> str:
    """The git subcommand of ``argv``: past git's own options (``-C <dir>``, ``-c name=value``)."""
    args = iter(argv[1:])
    for arg in args:
        if arg == "-C":
            next(args, None)
        elif not arg.startswith("-") and "=" not in arg:
            return arg
    return ""
