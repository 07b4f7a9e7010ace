"""One supervised launch, start to end: agent session, plan, preflight, execute, result line.

:func:`run_launch` is what ``agentc-supervisor launch`` runs, whichever parser read its command
line (:mod:`agentc.supervisor.launch.request` or the click application). Planning writes nothing
(:mod:`.launch_plan`); the launch preflight re-checks the host (:mod:`.preflight`); execution
prepares the run, runs the sandbox and records its end (:mod:`.launch_execute`). The result is
one JSON line on stdout; the exit status is the harness's.
"""

from __future__ import annotations

import dataclasses
import json

from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import agentsession, preflight
from agentc.supervisor.launch import execute as launch_execute
from agentc.supervisor.launch import plan as launch_plan
from agentc.supervisor.launch.request import LaunchRequest


def run_launch(config: SupervisorConfig, request: LaunchRequest, dry_run: bool) -> int:
    """Plan, check and run one launch (or print its plan); returns the exit status.

    A real launch first makes sure it runs in its agent session: it keeps an inherited one for
    ``headless:<role>``, else establishes one in this process (:mod:`.agentsession`).
    """
    if dry_run:
        session = agentsession.current(request.role)
    else:
        session = agentsession.ensure(config, request.role)
    request = dataclasses.replace(request, agent_session=session)
    plan = launch_plan.plan(config, request)
    if dry_run:
        print(json.dumps(launch_plan.describe(plan), indent=2), flush=True)
        return 0
    preflight.require(config, plan)
    outcome = launch_execute.execute(plan)
    result = {
        "session_id": request.launch_id,
        "reason": outcome.reason,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        **request.agent_session_fields(),
    }
    if plan.gateway is not None:
        result["cap"] = outcome.cap
    print(json.dumps(result), flush=True)
    return outcome.shell_status
