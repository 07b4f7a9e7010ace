"""``host.toml``: the host's own settings (``agentc-host --config``, default
``/etc/agentc/host.toml``; a missing file equals the defaults).

Declared with :mod:`agentc.files.settings` (the one settings loader): unknown keys and bad values
are refused, every problem named by its dotted key. The paths here are where everything of a
supervised host lives; ``setup`` writes ``supervisor.toml``'s host keys from them once and
refuses a ``supervisor.toml`` that disagrees (:func:`agentc.host.seeds.supervisor_disagreement`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from agentc.core.errors import ConfigError
from agentc.files.options import ETC, default_config
from agentc.files.settings import (
    Settings,
    absolute_path,
    boolean,
    integer,
    list_of,
    number,
    one_of,
    optional,
    section,
    setting,
    string,
)

DEFAULT_CONFIG = default_config("host")
Init = Literal["auto", "systemd", "cron"]
INITS: tuple[Init, ...] = ("auto", "systemd", "cron")
_ACCOUNT = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_SYSTEMD_VALUE = re.compile(r"^[A-Za-z0-9 *:/.,_-]{1,64}$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9@._-]{1,64}$")


def account_name(value: object) -> str:
    """A local account name (what ``useradd`` accepts by default), never root."""
    name = string(value)
    if not _ACCOUNT.fullmatch(name) or name == "root":
        raise ValueError(f"must be an account name ([a-z_][a-z0-9_-]*, not root), got {name!r}")
    return name


def time_value(value: object) -> str:
    """A systemd time value (``OnCalendar``/``OnUnitActiveSec``); cron forms are checked when a
    cron file is written (:mod:`agentc.attention.units`)."""
    text = string(value)
    if not _SYSTEMD_VALUE.match(text):
        raise ValueError(f"{text!r} is not a systemd time value")
    return text


def index_location(value: object) -> str:
    """A release index: an ``https://`` URL or an absolute folder."""
    text = string(value)
    if text.startswith("https://") and len(text) > len("https://"):
        return text.rstrip("/")
    if text.startswith("/") and ".." not in Path(text).parts:
        return text.rstrip("/") or "/"
    raise ValueError(f"must be an https:// URL or an absolute folder, got {text!r}")


def _namespace(value: object) -> str:
    text = string(value)
    if not _NAMESPACE.match(text):
        raise ValueError(f"must be 1-64 of [A-Za-z0-9@._-], got {text!r}")
    return text


class Accounts(Settings):
    """``[accounts]``: the four accounts setup makes (each its own group, no login shell)."""

    implementer: str = setting(account_name, default="agentc-impl")
    reviewer: str = setting(account_name, default="agentc-rev")
    push: str = setting(account_name, default="agentc-push")
    egress: str = setting(account_name, default="agentc-egress")

    def cross_checks(self) -> Iterable[tuple[str, str]]:
        seen: dict[str, str] = {}
        for key in ("implementer", "reviewer", "push", "egress"):
            name = getattr(self, key)
            if name in seen:
                yield key, f"{name} is also the {seen[name]}'s account; each needs its own"
            seen[name] = key

    def by_role(self) -> dict[str, str]:
        return {
            "implementer": self.implementer,
            "reviewer": self.reviewer,
            "push": self.push,
            "egress": self.egress,
        }


class Timers(Settings):
    """``[timers]``: the schedules (systemd time values; cron takes the forms of
    :mod:`agentc.attention.units`)."""

    attention_check_interval: str = setting(time_value, default="10min")
    attention_digest_calendar: str = setting(time_value, default="daily")
    attention_canary_calendar: str = setting(time_value, default="*-*-* 00:00:00")
    update_calendar: str = setting(time_value, default="daily")


class Update(Settings):
    """``[update]``: the updater (docs/host.md, "Updates")."""

    # Where releases are published: an https:// URL or an absolute folder; none: no updates.
    index: str | None = setting(optional(index_location), default=None)
    # An extra CA bundle for an https index (a private CA); none: the system's.
    ca_file: Path | None = setting(optional(absolute_path), default=None)
    # ssh-keygen's allowed_signers file naming the keys a manifest may be signed with.
    signers: Path | None = setting(optional(absolute_path), default=None)  # <etc>/update-signers
    signer: str = setting(_namespace, default="agentc-release")  # the principal (-I)
    namespace: str = setting(_namespace, default="agentc-release")  # ssh-keygen -n
    keep: int = setting(integer(minimum=1, maximum=50), default=3)
    drain_timeout_minutes: float = setting(number(above=0), default=240.0)
    settle_seconds: float = setting(number(minimum=0), default=10.0)
    poll_seconds: float = setting(number(above=0), default=15.0)
    fetch_timeout_seconds: float = setting(number(above=0), default=60.0)
    max_release_mib: int = setting(integer(minimum=1), default=512)
    # The harnesses canaried after a switch; none: attention.toml's [canary] harnesses when that
    # file exists, else no canary. Each must be one of those.
    canary_harnesses: list[str] | None = setting(optional(list_of(string)), default=None)
    harness: bool = setting(boolean, default=True)  # the staged harness step
    timer: bool = setting(boolean, default=True)  # false: the timer is written, never enabled


class HostSettings(Settings):
    """Every ``host.toml`` key, with its default."""

    state_dir: Path = setting(absolute_path, default=Path("/var/lib/agentc"))
    etc_dir: Path = setting(absolute_path, default=ETC)
    opt_dir: Path = setting(absolute_path, default=Path("/opt/agentc"))
    systemd_dir: Path = setting(absolute_path, default=Path("/etc/systemd/system"))
    cron_dir: Path = setting(absolute_path, default=Path("/etc/cron.d"))
    log_dir: Path = setting(absolute_path, default=Path("/var/log"))
    run_dir: Path = setting(absolute_path, default=Path("/run"))
    # systemd, cron (a host without systemd), or auto: systemd when it is running.
    init: Init = setting(one_of(INITS), default="auto")
    # The interpreter each release's virtual environment is made with (every account runs it).
    python: Path = setting(absolute_path, default=Path("/usr/bin/python3"))
    # The harnesses whose protected seeds setup writes (Claude Code's claude-config).
    harnesses: list[str] = setting(list_of(string), default_factory=lambda: ["claude"])
    accounts: Accounts = setting(section(Accounts), default_factory=Accounts)
    timers: Timers = setting(section(Timers), default_factory=Timers)
    update: Update = setting(section(Update), default_factory=Update)

    def cross_checks(self) -> Iterable[tuple[str, str]]:
        for key in ("state_dir", "etc_dir", "opt_dir"):
            if getattr(self, key) == Path("/"):
                yield key, "must not be /"

    @property
    def bin_dir(self) -> Path:
        return self.opt_dir / "bin"

    @property
    def releases(self) -> Path:
        return self.opt_dir / "releases"

    @property
    def current(self) -> Path:
        """The symlink naming the live release (renamed atomically by the updater)."""
        return self.opt_dir / "current"

    @property
    def supervisor_toml(self) -> Path:
        return self.etc_dir / "supervisor.toml"

    @property
    def signers_file(self) -> Path:
        return self.update.signers or self.etc_dir / "update-signers"

    @property
    def record(self) -> Path:
        """What setup installed (:mod:`agentc.host.record`)."""
        return self.state_dir / "host-setup.json"

    @property
    def egress_socket(self) -> Path:
        return self.run_dir / "agentc-egress" / "proxy.sock"


def load_settings(path: Path | None) -> HostSettings:
    """``path``, else the default file when it exists, else the defaults."""
    if path is None:
        if not DEFAULT_CONFIG.exists():
            return HostSettings()
        path = DEFAULT_CONFIG
    if not path.exists():
        raise ConfigError(f"{path}: no such host settings file")
    return HostSettings.load(path, what="host settings")
