"""The supervisor's one settings model (``supervisor.toml``); unknown keys are errors.

Declared with :mod:`agentc.files.settings`, not pydantic: every launch loads this module, and
pydantic's import alone cost ~200 ms of each launch (docs/benchmarks.md). Every key has one
check and one default, in its field below; a file is checked key by key and every problem is
reported together, naming its key. Relay addresses follow :mod:`agentc.egress.addresses`,
the rules the relay itself applies, so a file that loads is one the launch can carry.

Host mode keeps state under ``/var/lib/agentc`` and launches as the role accounts; personal
mode keeps it under ``~/.local/state/agentc`` and launches as the invoking user, with that
user's home and secrets masked. The mode changes where state lives and whether uids switch,
never which checks run.
"""

from __future__ import annotations

import os
import pwd
import re
from pathlib import Path
from typing import TypeVar

from agentc.core.roles import MODES, Mode
from agentc.egress.addresses import (
    UNIX_PREFIX,
    UnixTarget,
    parse_host_target,
    parse_loopback_address,
)
from agentc.files.options import default_config
from agentc.files.settings import (
    Check,
    Settings,
    absolute_path,
    absolute_paths,
    boolean,
    integer,
    list_of,
    one_of,
    optional,
    path,
    section,
    setting,
    string,
    table_of,
)
from agentc.push.protocol import WIP_MAX_MIB, WIP_MAX_REFS
from agentc.sandbox.limits import Limits
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.command import PREFIX as COMMAND_PREFIX
from agentc.supervisor.loop.settings import (
    HealthSettings,
    PriceSettings,
    ProjectSetup,
    RunSettings,
    Verification,
    prices_table,
    project_table,
)

DEFAULT_CONFIG = default_config("supervisor")
T = TypeVar("T")


def _relay_address(value: object) -> str | None:
    """A loopback ``a.b.c.d:port`` the relay can carry; an empty string (or None) is off."""
    text = optional(string)(value)
    return str(parse_loopback_address(text)) if text else None


def _unix_socket(value: object) -> Path:
    """A Unix socket path the relay can reach, as written: absolute, normalized (no ``.``,
    ``..``, ``//`` or trailing ``/``) and a name that fits ``sun_path``."""
    text = str(value) if isinstance(value, Path) else string(value)
    target = parse_host_target(UNIX_PREFIX + text, what="socket path")
    assert isinstance(target, UnixTarget)
    return target.path


def _gateway_address(value: object) -> str | None:
    """A loopback address, or the gateway's ``unix_socket`` as ``unix:/abs/path``."""
    text = optional(string)(value)
    return str(parse_host_target(text, what="relay address")) if text else None


def _harness_table(check: Check[T]) -> Check[dict[str, T]]:
    return table_of(check, keys=registry.HARNESSES, kind="harness")  # read when checked


def _account_name(value: object) -> str:
    """A local account name (what ``useradd`` accepts by default)."""
    name = string(value)
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name):
        raise ValueError(f"must be an account name ([a-z_][a-z0-9_-]*, at most 32), got {name!r}")
    return name


class PushHelperSettings(Settings):
    """The candidate push helper (``[push_helper]``; docs/push.md)."""

    # Host mode: the helper's own account (never root, never a role's uid, no admin group).
    user: str = setting(_account_name, default="agentc-push")
    # The argv prefix running ``agentc-push``; none: this interpreter's ``-m agentc.push.cli``.
    program: list[str] | None = setting(optional(list_of(string)), default=None)
    # The remote credential (``--ssh-key``): readable by the helper's account only.
    ssh_key: Path | None = setting(optional(absolute_path), default=None)
    # The ssh remote's host keys (``--known-hosts``; with ssh_key): the helper's HOME is a
    # fresh per-launch directory, so without this file ssh has nothing to check the host by.
    known_hosts: Path | None = setting(optional(absolute_path), default=None)
    # Each launch's WIP quota (``--wip-max-refs``, ``--wip-max-mib``): WIP refs, and MiB of new
    # objects they publish in all; the candidate is never counted.
    wip_max_refs: int = setting(integer(minimum=0), default=WIP_MAX_REFS)
    wip_max_mib: int = setting(integer(minimum=0), default=WIP_MAX_MIB)


class SupervisorConfig(Settings):
    """Every supervisor setting, with defaults; an empty file equals the defaults.

    Constructing one checks (and converts) every field; a bad value raises ``ValueError``
    (a ``SettingsError``) naming the key.
    """

    mode: Mode = setting(one_of(MODES), default="host")
    # host: /var/lib/agentc; personal: ~/.local/state/agentc
    state_dir: Path | None = setting(optional(absolute_path), default=None)
    bin_dir: Path = setting(absolute_path, default=Path("/opt/agentc/bin"))
    bubblewrap: Path = setting(absolute_path, default=Path("/usr/bin/bwrap"))
    implementer_user: str = setting(string, default="agentc-impl")
    reviewer_user: str = setting(string, default="agentc-rev")
    # The egress proxy (docs/network.md): ``egress_listen`` is the loopback address the harness
    # uses inside the launch (``""``: no internet), relayed to the proxy's Unix socket
    # ``egress_socket``, whose directory is masked inside every launch.
    egress_listen: str | None = setting(_relay_address, default="127.0.0.1:3128")
    egress_socket: Path = setting(_unix_socket, default=Path("/run/agentc-egress/proxy.sock"))
    coordinator_listen: str | None = setting(_relay_address, default=None)
    # The model gateway (docs/gateway.md): the default way every launch reaches its model.
    # ``gateway_listen`` is the loopback address the harness uses inside the launch (relayed
    # to the host's ``gateway_address``, which defaults to the same address, or may be the
    # gateway's ``unix_socket`` as ``unix:/path``, whose directory is masked too); an empty
    # string turns the gateway off. The supervisor issues and revokes each launch's sentinel
    # over ``gateway_control``, whose directory is masked inside every launch.
    gateway_listen: str | None = setting(_relay_address, default="127.0.0.1:8788")
    gateway_address: str | None = setting(_gateway_address, default=None)
    gateway_control: Path = setting(absolute_path, default=Path("/run/agentc-gateway/control.sock"))
    # The launches' event logs (agentc.files.launchlog; the gateway's and the egress proxy's
    # ``launch_logs``): the loop adds each launch's end and pushes, and records the summary of
    # a submitted attempt's log. Masked inside every launch. None: no event logs.
    launch_logs: Path | None = setting(optional(absolute_path), default=None)
    # The gateway upstream each harness's sentinel is bound to.
    gateway_upstreams: dict[str, str] = setting(
        _harness_table(string),
        default_factory=lambda: {"claude": "claude", "codex": "codex", "pi": "claude"},
    )
    # Opt-in only: hand Claude Code the role's token file as CLAUDE_CODE_OAUTH_TOKEN (any shell
    # the agent opens can read it; docs/security.md). Claude then bypasses the gateway.
    token_in_env: bool = setting(boolean, default=False)
    harness_paths: dict[str, Path] = setting(_harness_table(path), default_factory=dict)
    # Per harness, text its ``--version`` must print (the release this host was qualified
    # with); checked by ``preflight`` and when the loop starts. Empty: any version.
    pinned: dict[str, str] = setting(_harness_table(string), default_factory=dict)
    # The argv prefix running agentc-supervisor inside the sandbox.
    supervisor_program: list[str] | None = setting(optional(list_of(string)), default=None)
    # A prefix to the harness, in the sandbox.
    wrapper: list[str] = setting(list_of(string), default_factory=list)
    masks: list[Path] = setting(absolute_paths, default_factory=list)  # extra paths to hide
    expose: list[Path] = setting(absolute_paths, default_factory=list)  # read-only bind-backs
    toolchain_dir: Path = setting(absolute_path, default=Path("/opt/agentc"))
    # Every launch runs in an agent session ``headless:<role>``, established in the launch
    # process by agentns's ladder (docs/agentns.md). true: no_unshare (a synthesized id, mode
    # no-unshare, never a prctl: for a wintermute kernel where the launch lacks
    # CAP_SYS_ADMIN). false: agentns decides (a stock kernel synthesizes with one warning
    # line, mode synth-fallback).
    agentns_no_unshare: bool = setting(boolean, default=False)
    # Per-launch resource limits (``[limits]``; docs/security.md "Resource limits").
    limits: Limits = setting(section(Limits), default_factory=Limits)
    # The live loop (agentc-supervisor run; docs/supervisor.md).
    run: RunSettings = setting(section(RunSettings), default_factory=RunSettings)
    # The candidate push helper of implementer launches (``[push_helper]``; docs/push.md).
    push_helper: PushHelperSettings = setting(
        section(PushHelperSettings), default_factory=PushHelperSettings
    )
    health: HealthSettings = setting(section(HealthSettings), default_factory=HealthSettings)
    setup: dict[str, ProjectSetup] = setting(project_table(ProjectSetup), default_factory=dict)
    # Verifying reviewers, per project (``[verification.<project-id>]``; docs/supervisor.md).
    verification: dict[str, Verification] = setting(
        project_table(Verification), default_factory=dict
    )
    prices: dict[str, PriceSettings] = setting(prices_table, default_factory=dict)

    def resolved_state_dir(self) -> Path:
        if self.state_dir is not None:
            return self.state_dir
        if self.mode == "host":
            return Path("/var/lib/agentc")
        return user_home() / ".local/state/agentc"

    def harness_program(self, harness: str) -> Path:
        if harness.startswith(COMMAND_PREFIX):  # command:<path>: any executable as the agent
            return Path(harness.removeprefix(COMMAND_PREFIX))
        return self.harness_paths.get(harness, self.bin_dir / harness)

    def gateway_target(self) -> str | None:
        """The gateway's host address (or ``unix:/path``) the relay connects to; None: off."""
        if not self.gateway_listen:
            return None
        return self.gateway_address or self.gateway_listen

    def role_user(self, role: str) -> str:
        return self.implementer_user if role == "implementer" else self.reviewer_user


def user_home() -> Path:
    """The invoking user's home from the password database, never from ``$HOME``."""
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def load_config(path: Path | None) -> SupervisorConfig:
    """Read ``path`` (or the default file if present, else defaults); errors name the key."""
    if path is None:
        if not DEFAULT_CONFIG.exists():
            return SupervisorConfig()
        path = DEFAULT_CONFIG
    return SupervisorConfig.load(path, what="supervisor configuration")
