"""``launch-root``: root checks the host, then runs ``launch`` as the role account.

The role account's ``launch`` gets only ``PATH``, ``LANG`` and ``HOME`` (its role home) plus
the agent session's ``AGENTNS_SESSION_ID``, ``AGENTNS_INTENT`` and ``AGENTNS_MODE``, no
supplementary groups beyond its own, and exits with the launch's code; a signal death of the
child is reported as 128+n.

``launch-root`` establishes the agent session ``headless:<role>`` itself, in its own process,
after its host checks and before it switches accounts
(:mod:`agentc.supervisor.launch.agentsession`): as root it may create a real agent namespace,
which the role account could not (CAP_SYS_ADMIN). The role's ``launch`` inherits the namespace
and the variables, and keeps that session instead of establishing another.

The role account cannot create cgroups, so ``launch-root`` makes the launch's cgroup as root
(:class:`agentc.sandbox.limits.LaunchLimits`, ``[limits]`` of supervisor.toml) and places the
role's ``launch`` in it before switching uid: the whole launch, every process it starts, is
bounded in memory and processes. When the cgroup counted a limit hit and the role's launch
(which sees no cgroup of its own) recorded none, ``launch-root`` names it in the run's
``.state-terminal.json``. The cgroup is removed, any process left in it killed, at the end.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.core.roles import role_slug
from agentc.files import write_atomic
from agentc.files.accounts import become, unprivileged_account
from agentc.files.procs import system_env
from agentc.sandbox.limits import LaunchLimits
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import agentsession, preflight
from agentc.supervisor.launch.plan import supervisor_program
from agentc.supervisor.launch.request import LaunchRequest
from agentc.supervisor.launch.rundir import RunLayout


def program_problems(config: SupervisorConfig) -> list[str]:
    """The installed ``agentc-supervisor`` (run as the role inside every launch, for the
    relays) is root's and nobody else can write it or its directories."""
    program = supervisor_program(config)
    if program[0].startswith("/") and config.supervisor_program is None:
        return preflight.protected_problems(Path(program[0]), "agentc-supervisor", {0})
    return []


def host_problems(config: SupervisorConfig, request: LaunchRequest) -> list[str]:
    """Checks only root can make: the supervisor binary, the account, the seed layout."""
    problems = program_problems(config)
    state = Path(os.path.realpath(config.resolved_state_dir()))
    layout = RunLayout(state, request.role, request.run, request.clone)
    problems += preflight.layout_problems(config, layout, request.harness)
    return problems


def role_account(config: SupervisorConfig, role: str) -> pwd.struct_passwd:
    """The role's account, which must exist and must not be root."""
    return unprivileged_account(config.role_user(role), "role account")


def push_account(config: SupervisorConfig) -> pwd.struct_passwd | None:
    """Host mode's push account (``[push_helper] user``), which must exist and must not be
    root; None in personal mode (the helper runs as the loop's user)."""
    if config.mode != "host":
        return None
    return unprivileged_account(config.push_helper.user, "the push helper's account")


def run_as_role(
    config: SupervisorConfig,
    config_path: Path | None,
    request: LaunchRequest,
) -> int:
    if sys.platform != "linux":
        raise SupervisorError("launch-root runs on Linux only")
    if os.geteuid() != 0:
        raise SupervisorError("launch-root must run as root")
    if config.mode != "host":
        raise SupervisorError("launch-root is for host mode; personal mode runs launch directly")
    account = role_account(config, request.role)
    problems = host_problems(config, request)
    if problems:
        raise SupervisorError("host checks failed: " + "; ".join(problems))
    # A refused launch never gets a session; an accepted one gets it here, as root.
    session = agentsession.ensure(config, request.role)
    argv = [*supervisor_program(config)]
    if config_path is not None:
        argv += ["--config", str(config_path)]
    argv += ["launch", f"--role={request.role}", f"--harness={request.harness}"]
    argv += [f"--run={request.run}", f"--clone={request.clone}", f"--model={request.model}"]
    argv += [f"--session-id={request.launch_id}"]
    if request.harness_args is not None:
        argv += ["--", *request.harness_args]
    home = config.resolved_state_dir() / role_slug(request.role)
    env = system_env(HOME=str(home / "home"))
    env.update(session.env())
    limits = LaunchLimits(config.limits, f"agentc-{request.launch_id}")
    try:
        limits.create()
    except OSError as exc:
        raise SupervisorError(f"cannot create the launch's cgroup: {exc}") from None
    try:
        code = _run_child(argv, env, account, limits)
        hit = limits.hit()
    finally:
        limits.remove()
    if hit is not None:
        name_limit(request.run, hit)
    return code


def _run_child(
    argv: list[str], env: dict[str, str], account: pwd.struct_passwd, limits: LaunchLimits
) -> int:
    """Run ``argv`` as ``account`` inside the launch's cgroup (joined while still root)."""

    def become_role() -> None:
        limits.enter()  # the cgroup and the rlimits, before the uid switch
        become(account)

    proc = subprocess.Popen(argv, env=env, cwd="/", close_fds=True, preexec_fn=become_role)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait()
    return 128 - code if code < 0 else code


def name_limit(run: Path, limit: str) -> None:
    """Record ``limit`` in the run's terminal record when the launch named none (through a
    descriptor of the run directory, following no symlink; owner and mode kept)."""
    name = ".state-terminal.json"
    try:
        dir_fd = os.open(run, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return  # the launch never got far enough to record its end
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            try:
                record = json.loads(handle.read(1 << 20))
            except ValueError:
                return
        if not isinstance(record, dict) or record.get("limit") is not None:
            return
        record["limit"] = limit
        data = json.dumps(record).encode()
        write_atomic(Path(name), data, mode=info.st_mode & 0o777, dir_fd=dir_fd)
        os.chown(name, info.st_uid, info.st_gid, dir_fd=dir_fd, follow_symlinks=False)
    finally:
        os.close(dir_fd)
