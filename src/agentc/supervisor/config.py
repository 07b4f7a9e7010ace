"""The supervisor's one settings model (``supervisor.toml``); unknown keys are errors.

Validated by hand, not by pydantic: every launch loads this module, and pydantic's import
alone cost ~200 ms of each launch (docs/benchmarks.md). Every key has one checker below; a
file is checked key by key and every problem is reported together, naming its key.

Host mode keeps state under ``/var/lib/agentc`` and launches as the role accounts; personal
mode keeps it under ``~/.local/state/agentc`` and launches as the invoking user, with that
user's home and secrets masked. The mode changes where state lives and whether uids switch,
never which checks run.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

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


def check_gateway_address(value: str, key: str) -> str:
    """A loopback ``a.b.c.d:port``, or ``unix:/abs/path`` for the gateway's ``unix_socket``."""
    if not value.startswith("unix:"):
        return check_loopback_address(value, key)
    path = value.removeprefix("unix:")
    if not path.startswith("/") or path.startswith("//") or os.path.normpath(path) != path:
        raise ValueError(f"{key}: {path!r} must be an absolute, normalized socket path")
    if "\0" in path or len(os.fsencode(path)) > 107:
        raise ValueError(f"{key}: {path!r} is not a usable Unix socket path (NUL, > 107 bytes)")
    return value


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _path(value: object) -> Path:
    if isinstance(value, Path):
        return value
    return Path(_string(value))


def _absolute(value: object) -> Path:
    path = _path(value)
    if not path.is_absolute():
        raise ValueError(f"must be an absolute path, got {path}")
    return path


def _optional_absolute(value: object) -> Path | None:
    return None if value is None else _absolute(value)


def _absolute_list(value: object) -> list[Path]:
    paths = [_path(item) for item in _list(value)]
    for path in paths:
        if not path.is_absolute() or ".." in path.parts:
            raise ValueError(f"must be absolute paths without '..', got {path}")
    return paths


def _list(value: object) -> list[object]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"expected a list, got {type(value).__name__}")
    return list(value)


def _strings(value: object) -> list[str]:
    return [_string(item) for item in _list(value)]


def _optional_strings(value: object) -> list[str] | None:
    return None if value is None else _strings(value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {type(value).__name__}")
    return value


def _mode(value: object) -> str:
    if value not in ("host", "personal"):
        raise ValueError(f"must be 'host' or 'personal', got {value!r}")
    return _string(value)


def _loopback(value: object) -> str | None:
    # An empty string turns the relay off (TOML has no null).
    text = None if value is None else _string(value)
    return check_loopback_address(text, "relay address") if text else None


def _gateway_address(value: object) -> str | None:
    text = None if value is None else _string(value)
    return check_gateway_address(text, "relay address") if text else None


def _harness_table(convert: Callable[[object], Any]) -> Callable[[object], dict[str, Any]]:
    def check(value: object) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a table, got {type(value).__name__}")
        for name in value:
            if name not in HARNESSES:
                raise ValueError(f"unknown harness {name!r} (known: {', '.join(HARNESSES)})")
        return {name: convert(item) for name, item in value.items()}

    return check


CHECKS: dict[str, Callable[[object], Any]] = {
    "mode": _mode,
    "state_dir": _optional_absolute,
    "bin_dir": _absolute,
    "bubblewrap": _absolute,
    "implementer_user": _string,
    "reviewer_user": _string,
    "egress_listen": _loopback,
    "coordinator_listen": _loopback,
    "gateway_listen": _loopback,
    "gateway_address": _gateway_address,
    "gateway_control": _absolute,
    "gateway_upstreams": _harness_table(_string),
    "token_in_env": _bool,
    "harness_paths": _harness_table(_path),
    "supervisor_program": _optional_strings,
    "wrapper": _strings,
    "masks": _absolute_list,
    "expose": _absolute_list,
    "toolchain_dir": _absolute,
    "agentns_no_unshare": _bool,
}


@dataclass(frozen=True)
class SupervisorConfig:
    """Every supervisor setting, with defaults; an empty file equals the defaults.

    Constructing one checks (and converts) every field with its checker in ``CHECKS``; a bad
    value raises ``ValueError`` naming the key.
    """

    mode: Literal["host", "personal"] = "host"
    # host: /var/lib/agentc; personal: ~/.local/state/agentc
    state_dir: Path | None = None
    bin_dir: Path = Path("/opt/agentc/bin")
    bubblewrap: Path = Path("/usr/bin/bwrap")
    implementer_user: str = "agentc-impl"
    reviewer_user: str = "agentc-rev"
    egress_listen: str | None = "127.0.0.1:3128"
    coordinator_listen: str | None = None
    # The model gateway (docs/gateway.md): the default way every launch reaches its model.
    # ``gateway_listen`` is the loopback address the harness uses inside the launch (relayed
    # to the host's ``gateway_address``, which defaults to the same address, or may be the
    # gateway's ``unix_socket`` as ``unix:/path``, whose directory is masked too); an empty
    # string turns the gateway off. The supervisor issues and revokes each launch's sentinel
    # over ``gateway_control``, whose directory is masked inside every launch.
    gateway_listen: str | None = "127.0.0.1:8788"
    gateway_address: str | None = None
    gateway_control: Path = Path("/run/agentc-gateway/control.sock")
    # The gateway upstream each harness's sentinel is bound to.
    gateway_upstreams: dict[str, str] = field(
        default_factory=lambda: {"claude": "claude", "codex": "codex", "pi": "claude"}
    )
    # Opt-in only: hand Claude Code the role's token file as CLAUDE_CODE_OAUTH_TOKEN (any shell
    # the agent opens can read it; docs/security.md). Claude then bypasses the gateway.
    token_in_env: bool = False
    harness_paths: dict[str, Path] = field(default_factory=dict)
    # The argv prefix running agentc-supervisor inside the sandbox.
    supervisor_program: list[str] | None = None
    wrapper: list[str] = field(default_factory=list)  # a prefix to the harness, in the sandbox
    masks: list[Path] = field(default_factory=list)  # extra paths to hide
    expose: list[Path] = field(default_factory=list)  # read-only bind-backs
    toolchain_dir: Path = Path("/opt/agentc")
    # Every launch runs in an agent session ``headless:<role>``, established in the launch
    # process by agentns's ladder (docs/agentns.md). true: no_unshare (a synthesized id, mode
    # no-unshare, never a prctl: for a wintermute kernel where the launch lacks
    # CAP_SYS_ADMIN). false: agentns decides (a stock kernel synthesizes with one warning
    # line, mode synth-fallback).
    agentns_no_unshare: bool = False

    def __post_init__(self) -> None:
        problems: list[str] = []
        for item in fields(self):
            try:
                checked = CHECKS[item.name](getattr(self, item.name))
            except ValueError as exc:
                problems.append(f"{item.name}: {exc}")
                continue
            object.__setattr__(self, item.name, checked)
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> SupervisorConfig:
        """The settings of a parsed ``supervisor.toml``; unknown keys are errors."""
        unknown = [f"{key}: unknown setting" for key in data if key not in CHECKS]
        if unknown:
            raise ValueError("; ".join(unknown))
        return cls(**data)  # type: ignore[arg-type]  # every value is checked on construction

    def resolved_state_dir(self) -> Path:
        if self.state_dir is not None:
            return self.state_dir
        if self.mode == "host":
            return Path("/var/lib/agentc")
        return user_home() / ".local/state/agentc"

    def harness_program(self, harness: str) -> Path:
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
    import tomllib  # only when there is a file to read

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    try:
        return SupervisorConfig.from_mapping(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
