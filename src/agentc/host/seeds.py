"""The files setup writes: each role's protected Claude seeds and ``supervisor.toml``'s host keys.

``supervisor.toml`` is a settings file: setup writes it once, from ``host.toml``, and refuses
to go on when an existing one names other accounts or paths than ``host.toml`` does
(:func:`supervisor_disagreement`), since the loop would then launch as accounts setup never
made, or look for state setup never laid out.
"""

from __future__ import annotations

from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.core.roles import claude_settings, role_slug
from agentc.files.toml import dump_toml
from agentc.host.settings import HostSettings

# Claude Code reads CLAUDE.md from its configuration directory: the one instruction every
# launch needs that the sandbox imposes (docs/host.md, "The seeds").
CLAUDE_MD = """\
# Working in this launch

Wait for a background command with Claude Code's own output and notification tools. Never poll
its output files from a shell loop: your shell cannot see the harness's temporary directory, so
such a loop never ends.
"""

SUPERVISOR_HEADER = """\
# supervisor.toml, written once by agentc-host setup from host.toml (docs/supervisor.md).
# Setup never rewrites this file once you have edited it. Before the loop can run, add:
#
# [run.binding]
# service_url = "https://coordinator.example.com"
# project_id = "<the project's id>"
# credential_file = "{etc}/impl/credentials.toml"

"""


def claude_config(role: str) -> dict[str, bytes]:
    """The files of the role's protected ``claude-config/`` (root 0444, nothing else)."""
    return {
        "settings.json": claude_settings(role_slug(role)).encode(),
        "CLAUDE.md": CLAUDE_MD.encode(),
    }


def host_keys(settings: HostSettings) -> dict[str, object]:
    """The top-level ``supervisor.toml`` keys that must agree with ``host.toml``."""
    return {
        "mode": "host",
        "state_dir": str(settings.state_dir),
        "bin_dir": str(settings.bin_dir),
        "implementer_user": settings.accounts.implementer,
        "reviewer_user": settings.accounts.reviewer,
        "egress_socket": str(settings.egress_socket),
    }


def supervisor_toml(settings: HostSettings) -> bytes:
    top: dict[str, object] = {
        **host_keys(settings),
        # Nothing of /etc/agentc is for a launch: its credentials are root's anyway.
        "masks": [str(settings.etc_dir)],
    }
    push = {"user": settings.accounts.push, "program": [str(settings.bin_dir / "agentc-push")]}
    header = SUPERVISOR_HEADER.format(etc=settings.etc_dir).encode()
    return header + dump_toml({(): top, ("push_helper",): push})


def supervisor_disagreement(settings: HostSettings, path: Path) -> list[str]:
    """Where an existing ``supervisor.toml`` (at ``path``, on this machine or in the prefix)
    disagrees with ``host.toml``: one problem per key. A file that does not load is a problem."""
    from agentc.supervisor.config import SupervisorConfig

    try:
        config = SupervisorConfig.load(path, what="supervisor configuration")
    except AgentcError as exc:
        return [str(exc)]
    found = {
        "mode": config.mode,
        "state_dir": str(config.resolved_state_dir()),
        "bin_dir": str(config.bin_dir),
        "implementer_user": config.implementer_user,
        "reviewer_user": config.reviewer_user,
        "egress_socket": str(config.egress_socket),
    }
    problems = [
        f"{path}: {key} is {found[key]!r}, but host.toml makes it {value!r} (change one of them)"
        for key, value in host_keys(settings).items()
        if found[key] != value
    ]
    if config.push_helper.user != settings.accounts.push:
        problems.append(
            f"{path}: push_helper.user is {config.push_helper.user!r}, but host.toml's "
            f"[accounts] push is {settings.accounts.push!r} (change one of them)"
        )
    return problems
