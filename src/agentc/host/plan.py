"""What a supervised host consists of: accounts, directories, files, links, credentials and units,
each with the owner, group and mode it must have. :func:`build` makes the list from the host's
settings and what is configured; :mod:`agentc.host.setup` compares it with the machine (or a
``--prefix`` folder) and changes only what differs.

Paths are the host's own (``/var/lib/agentc``...); with ``--prefix`` they are written below the
folder, the way a package's ``DESTDIR`` is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from agentc.core.roles import role_slug
from agentc.host import seeds, services
from agentc.host.parts import Account, Credential, Dir, File, Link, Plan
from agentc.host.settings import HostSettings

__all__ = ["Account", "Credential", "Dir", "File", "Link", "Plan", "build"]

# The programs every release provides, linked from ``<opt>/bin`` into the live release.
PROGRAMS = (
    "agentc-supervisor",
    "agent-coordinator",
    "agentc-push",
    "agentc-integrator",
    "agentc-attention",
    "agentc-host",
)
NO_HOME = Path("/nonexistent")


def accounts(settings: HostSettings) -> list[Account]:
    names = settings.accounts
    state = settings.state_dir
    return [
        Account("implementer", names.implementer, state / "impl" / "home"),
        Account("reviewer", names.reviewer, state / "rev" / "home"),
        Account("push", names.push, NO_HOME),
        Account("egress", names.egress, NO_HOME),
    ]


def _role_tree(settings: HostSettings, plan: Plan, role: str, user: str) -> None:
    parent = settings.state_dir / role_slug(role)
    plan.dirs.append(Dir(parent, "root", user, 0o750))
    for sub in ("runs", "clones", "home"):
        plan.dirs.append(Dir(parent / sub, user, user, 0o700, "tree"))
    if "claude" in settings.harnesses:
        config = parent / "claude-config"
        plan.dirs.append(Dir(config, "root", user, 0o750))
        for name, data in seeds.claude_config(role).items():
            plan.files.append(File(config / name, data, "root", "root", 0o444, "seed"))
        plan.credentials.append(
            Credential(parent / "claude-token", "root", user, 0o440, f"the {role}'s Claude token")
        )


def build(
    settings: HostSettings,
    init: Literal["systemd", "cron"],
    ready: services.Ready,
    settings_path: Path | None = None,
) -> Plan:
    """The whole host for ``settings`` (read from ``settings_path``, which units pass on);
    ``ready`` says what is configured (units wait for it)."""
    plan = Plan(init)
    plan.accounts = accounts(settings)
    names = settings.accounts
    etc, state, opt = settings.etc_dir, settings.state_dir, settings.opt_dir
    plan.dirs.append(Dir(state, "root", "root", 0o755))
    _role_tree(settings, plan, "implementer", names.implementer)
    _role_tree(settings, plan, "reviewer", names.reviewer)
    plan.dirs += [
        Dir(state / "push", "root", "root", 0o711),
        Dir(state / "loop", "root", "root", 0o700),
        Dir(state / "attention", "root", "root", 0o700),
        Dir(state / "egress", names.egress, names.egress, 0o700),
        Dir(etc, "root", "root", 0o755),
        Dir(etc / "impl", "root", "root", 0o700),
        Dir(etc / "rev", "root", "root", 0o700),
        Dir(opt, "root", "root", 0o755),
        Dir(settings.bin_dir, "root", "root", 0o755),
        Dir(settings.releases, "root", "root", 0o755),
    ]
    plan.links += [
        Link(settings.bin_dir / name, f"../current/venv/bin/{name}") for name in PROGRAMS
    ]
    plan.files.append(
        File(
            settings.supervisor_toml,
            seeds.supervisor_toml(settings),
            "root",
            "root",
            0o644,
            "settings",
        )
    )
    plan.credentials += [
        Credential(etc / "impl/credentials.toml", "root", "root", 0o400,
                   "the loop's implementer credential ([run.binding] credential_file)"),
        Credential(etc / "rev/credentials.toml", "root", "root", 0o400,
                   "the loop's reviewer credential ([run.reviewer_binding] credential_file)"),
        Credential(etc / "push-key", names.push, names.push, 0o400,
                   "the push helper's ssh key ([push_helper] ssh_key)"),
        Credential(etc / "attention-token", "root", "root", 0o400,
                   "the attention jobs' coordinator token (attention.toml token_file)"),
        Credential(settings.signers_file, "root", "root", 0o644,
                   "the release signers the updater trusts (ssh-keygen allowed_signers)",
                   secret=False),
    ]  # fmt: skip
    services.add_units(settings, plan, ready, settings_path)
    return plan
