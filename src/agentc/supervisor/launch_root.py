"""``launch-root``: root checks the host, then runs ``launch`` as the role account.

The role account's ``launch`` gets only ``PATH``, ``LANG`` and ``HOME`` (its role home) plus
the agent session's ``AGENTNS_SESSION_ID``, ``AGENTNS_INTENT`` and ``AGENTNS_MODE``, no
supplementary groups beyond its own, and exits with the launch's code; a signal death of the
child is reported as 128+n.

``launch-root`` establishes the agent session ``headless:<role>`` itself, in its own process,
after its host checks and before it switches accounts (:mod:`agentc.supervisor.agentsession`):
as root it may create a real agent namespace, which the role account could not
(CAP_SYS_ADMIN). The role's ``launch`` inherits the namespace and the variables, and keeps
that session instead of establishing another.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.supervisor import agentsession, preflight
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch_plan import supervisor_program
from agentc.supervisor.launch_request import LaunchRequest
from agentc.supervisor.roles import role_slug
from agentc.supervisor.rundir import RunLayout


def host_problems(config: SupervisorConfig, request: LaunchRequest) -> list[str]:
    """Checks only root can make: the supervisor binary, the account, the seed layout."""
    problems: list[str] = []
    program = supervisor_program(config)
    if program[0].startswith("/") and config.supervisor_program is None:
        problems += preflight.protected_problems(Path(program[0]), "agentc-supervisor", {0})
    state = Path(os.path.realpath(config.resolved_state_dir()))
    layout = RunLayout(state, request.role, request.run, request.clone)
    problems += preflight.layout_problems(config, layout, request.harness)
    return problems


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
    account_name = config.role_user(request.role)
    try:
        account = pwd.getpwnam(account_name)
    except KeyError:
        raise SupervisorError(f"role account {account_name} does not exist") from None
    if account.pw_uid == 0:
        raise SupervisorError(f"role account {account_name} must not be root")
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
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(home / "home")}
    env.update(session.env())
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd="/",
        user=account.pw_uid,
        group=account.pw_gid,
        extra_groups=[],
        close_fds=True,
    )
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait()
    return 128 - code if code < 0 else code
