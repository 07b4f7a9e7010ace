"""The harnesses a supervisor knows: one line each. Adding a harness is one adapter module
(:class:`agentc.supervisor.harness.base.Adapter`) and one line here.

``command:<path>`` (any executable) is not named here: :func:`adapter` gives it the
:class:`~agentc.supervisor.harness.command.Command` adapter by its prefix.
"""

from __future__ import annotations

from pathlib import Path

from agentc.supervisor.harness.base import Adapter
from agentc.supervisor.harness.claude import Claude
from agentc.supervisor.harness.codex import Codex
from agentc.supervisor.harness.command import PREFIX, Command
from agentc.supervisor.harness.env import HarnessSetup, ModelEndpoint
from agentc.supervisor.harness.pi import Pi

HARNESSES: dict[str, Adapter] = {
    "claude": Claude(),
    "codex": Codex(),
    "pi": Pi(),
}
COMMAND = Command()


def names() -> tuple[str, ...]:
    """The named harnesses (``command:<path>`` aside)."""
    return tuple(HARNESSES)


def named(name: str) -> Adapter | None:
    """The adapter of a named harness (None: no such harness)."""
    return HARNESSES.get(name)


def adapter(harness: str) -> Adapter | None:
    """The adapter of ``harness``: a named one or ``command:<path>`` (None: unknown)."""
    return COMMAND if is_command(harness) else HARNESSES.get(harness)


def is_command(harness: str) -> bool:
    return harness.startswith(PREFIX)


def quiet_env() -> dict[str, str]:
    """Every harness's switches that keep it offline apart from its model calls."""
    quiet: dict[str, str] = {}
    for item in HARNESSES.values():
        quiet.update(item.quiet_env)
    return quiet


def model_setup(
    harness: str, endpoint: ModelEndpoint, *, home: Path, codex_home: Path
) -> HarnessSetup:
    """How the named ``harness`` reaches ``endpoint`` (the model gateway, or a test's provider)."""
    adapter = HARNESSES.get(harness)
    if adapter is None or not adapter.uses_gateway:
        raise ValueError(f"unknown harness {harness!r}")
    return adapter.model_setup(endpoint, home=home, codex_home=codex_home)
