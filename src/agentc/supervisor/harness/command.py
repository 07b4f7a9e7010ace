"""A ``command:<path>`` agent: any executable, the operator's own program.

It gets no flags (the prompt on stdin, the clone as its directory), brings its own model access
if it needs any, writes no event stream we parse, and as a reviewer is handed
``$AGENTC_CANDIDATE_SHELL`` (candidate-run) to run candidate code in the nested sandbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentc.supervisor.harness.base import Adapter, LaunchRequest
from agentc.supervisor.launch.candidate_shell import PLAIN_SCRIPT

if TYPE_CHECKING:
    from agentc.supervisor.launch.rundir import RunLayout

PREFIX = "command:"


class Command(Adapter):
    name = "command"
    confines_reviewer = True  # trusted, and given candidate-run for candidate code
    uses_gateway = False
    candidate_script = PLAIN_SCRIPT

    def args(self, request: LaunchRequest) -> tuple[str, ...]:
        return ()

    def env(self, layout: RunLayout, request: LaunchRequest) -> dict[str, str]:
        if request.role != "reviewer":
            return {}
        return {"AGENTC_CANDIDATE_SHELL": str(layout.run / PLAIN_SCRIPT)}
