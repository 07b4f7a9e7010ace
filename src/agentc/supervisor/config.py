"""The supervisor's one settings model (``supervisor.toml``); unknown keys are errors.

Host mode keeps state under ``/var/lib/agentc`` and launches as the role accounts; personal
mode keeps it under ``~/.local/state/agentc`` and launches as the invoking user, with that
user's home and secrets masked. The mode changes where state lives and whether uids switch,
never which checks run.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentc.core.errors import ConfigError

DEFAULT_CONFIG = Path("/etc/agentc/supervisor.toml")
HARNESSES = ("claude", "codex", "pi")


def check_loopback_address(value: str, key: str) -> str:
    """An IPv4 loopback ``a.b.c.d:port`` with port >= 1024, as the relay can carry it."""
    host, sep, port = value.rpartition(":")
    parts = host.split(".")
    if (
        not sep
        or len(parts) != 4
        or not all(p.isdigit() and str(int(p)) == p for p in parts)
        or not port.isdigit()
    ):
        raise ValueError(f"{key} must be an IPv4 loopback address a.b.c.d:port, got {value!r}")
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(f"{key}: {host!r} is not an IPv4 address") from None
    if not address.is_loopback:
        raise ValueError(f"{key}: {host} is not a loopback address")
    if not 1024 <= int(port) <= 65535:
        raise ValueError(f"{key}: port {port} must be between 1024 and 65535")
    return value


class SupervisorConfig(BaseModel):
    """Every supervisor setting, with defaults; an empty file equals the defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["host", "personal"] = "host"
    state_dir: Path | None = Field(
        default=None, description="host: /var/lib/agentc; personal: ~/.local/state/agentc"
    )
    bin_dir: Path = Path("/opt/agentc/bin")
    bubblewrap: Path = Path("/usr/bin/bwrap")
    implementer_user: str = "agentc-impl"
    reviewer_user: str = "agentc-rev"
    egress_listen: str | None = "127.0.0.1:3128"
    coordinator_listen: str | None = None
    # The model gateway (docs/gateway.md): the default way every launch reaches its model.
    # ``gateway_listen`` is the loopback address the harness uses inside the launch (relayed
    # to the host's ``gateway_address``, which defaults to the same address); an empty
    # string turns the gateway off. The supervisor issues and revokes each launch's sentinel
    # over ``gateway_control``, whose directory is masked inside every launch.
    gateway_listen: str | None = "127.0.0.1:8788"
    gateway_address: str | None = None
    gateway_control: Path = Path("/run/agentc-gateway/control.sock")
    gateway_upstreams: dict[str, str] = Field(
        default_factory=lambda: {"claude": "claude", "codex": "codex", "pi": "claude"},
        description="the gateway upstream each harness's sentinel is bound to",
    )
    # Opt-in only: hand Claude Code the role's token file as CLAUDE_CODE_OAUTH_TOKEN (any shell
    # the agent opens can read it; docs/security.md). Claude then bypasses the gateway.
    token_in_env: bool = False
    harness_paths: dict[str, Path] = Field(default_factory=dict)
    supervisor_program: list[str] | None = Field(
        default=None, description="argv prefix running agentc-supervisor inside the sandbox"
    )
    wrapper: list[str] = Field(default_factory=list, description="e.g. agentns-claude prefix")
    masks: list[Path] = Field(default_factory=list, description="extra paths to hide")
    expose: list[Path] = Field(default_factory=list, description="read-only bind-backs")
    toolchain_dir: Path = Path("/opt/agentc")

    @field_validator("egress_listen", "coordinator_listen", "gateway_listen", "gateway_address")
    @classmethod
    def _loopback(cls, value: str | None) -> str | None:
        # An empty string turns the relay off (TOML has no null).
        return check_loopback_address(value, "relay address") if value else None

    @field_validator("harness_paths", "gateway_upstreams")
    @classmethod
    def _harness_names(cls, value: dict[str, Path]) -> dict[str, Path]:
        for name in value:
            if name not in HARNESSES:
                raise ValueError(f"unknown harness {name!r} (known: {', '.join(HARNESSES)})")
        return value

    @field_validator("state_dir", "bin_dir", "bubblewrap", "toolchain_dir", "gateway_control")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError(f"must be an absolute path, got {value}")
        return value

    @field_validator("masks", "expose")
    @classmethod
    def _absolute_list(cls, value: list[Path]) -> list[Path]:
        for path in value:
            if not path.is_absolute() or ".." in path.parts:
                raise ValueError(f"must be absolute paths without '..', got {path}")
        return value

    def resolved_state_dir(self) -> Path:
        if self.state_dir is not None:
            return self.state_dir
        if self.mode == "host":
            return Path("/var/lib/agentc")
        return user_home() / ".local/state/agentc"

    def harness_program(self, harness: str) -> Path:
        return self.harness_paths.get(harness, self.bin_dir / harness)

    def gateway_target(self) -> str | None:
        """The gateway's host address the relay connects to, or None when it is off."""
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
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    try:
        return SupervisorConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from None
