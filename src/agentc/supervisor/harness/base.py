"""What a harness adapter is: the one home of everything the supervisor knows of one harness.

An adapter gives a launch its harness's argv, environment, files and read-only trees, how it is
pointed at the model gateway, whether a reviewer's commands can be confined, the variable the
token opt-in fills, the switches that keep it quiet, and the parser of its event stream.
:mod:`agentc.supervisor.harness.registry` holds one line per harness; adding a harness is one
module with one :class:`Adapter` and one line there.

Light on purpose: a launch imports every adapter (tests/supervisor/test_launch_lean.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from agentc.supervisor.launch.candidate_shell import SCRIPT

if TYPE_CHECKING:
    from agentc.supervisor.harness.env import HarnessSetup, ModelEndpoint
    from agentc.supervisor.harness.stream import State
    from agentc.supervisor.launch.rundir import RunLayout


class LaunchRequest(Protocol):
    """What an adapter reads of a launch's request (:class:`agentc.supervisor.launch.request.
    LaunchRequest`; named here so the adapters do not import the request, which uses them)."""

    @property
    def role(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def launch_id(self) -> str: ...
    @property
    def clone(self) -> Path: ...


class Adapter:
    """One harness. Subclasses set :attr:`name` and override what their harness needs."""

    name: ClassVar[str]
    # The variable the token opt-in (``token_in_env``) hands the role's token in; None: no
    # token-in-env mode, the harness reaches its model through the gateway only.
    token_env: ClassVar[str | None] = None
    # A reviewer launch may run it: every command it runs on the candidate can be confined.
    confines_reviewer: ClassVar[bool] = False
    # It is pointed at the model gateway (a command: agent brings its own model access).
    uses_gateway: ClassVar[bool] = True
    # Switches that keep it offline apart from its model calls (updates, telemetry, reports).
    quiet_env: ClassVar[Mapping[str, str]] = {}
    # The script a reviewer's commands on the candidate go through, in the run directory.
    candidate_script: ClassVar[str] = SCRIPT

    def args(self, request: LaunchRequest) -> tuple[str, ...]:
        """Its default flags for ``request`` (the prompt comes on stdin): the harness's own
        sandbox off, because it cannot nest in ours. A ``command:<path>`` agent gets none: the
        prompt on stdin, the clone as its directory."""
        raise NotImplementedError

    def env(self, layout: RunLayout, request: LaunchRequest) -> dict[str, str]:
        """Its own entries of the launch's environment."""
        return {}

    def config_dir(self, layout: RunLayout) -> Path | None:
        """A protected, read-only configuration tree of the role's it reads (None: none)."""
        return None

    def model_setup(self, endpoint: ModelEndpoint, *, home: Path, codex_home: Path) -> HarnessSetup:
        """How it reaches ``endpoint``: environment entries, files and flags."""
        raise NotImplementedError(f"harness {self.name} does not use the model gateway")

    def parse(self, state: State, event: Mapping[str, Any]) -> None:
        """Apply one event of its stream (a JSON object) to ``state``."""
