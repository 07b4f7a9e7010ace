"""The loop's tables of ``supervisor.toml``: ``[run]``, ``[run.binding]``,
``[run.reviewer_binding]``, ``[run.canary_binding]``, ``[health]``, ``[health.fallback]``,
``[setup.<project-id>]``, ``[verification.<project-id>]`` and ``[prices.<model>]``.

Declared with :mod:`agentc.files.settings` like the rest of the file: one check and one default
per key, unknown keys refused, every problem named by its dotted key. docs/supervisor.md lists
every key (tests/supervisor/loop/test_settings.py keeps the page and these classes in step).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from agentc.core.addresses import is_loopback_host
from agentc.core.quiet import parse_window
from agentc.egress.addresses import url_relay_address
from agentc.files.settings import (
    Check,
    Settings,
    absolute_path,
    boolean,
    integer,
    list_of,
    number,
    optional,
    section,
    setting,
    string,
    table_of,
)
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.command import PREFIX as COMMAND_PREFIX

S = TypeVar("S", bound=Settings)


def harness_name(value: object) -> str:
    """``claude``, ``codex``, ``pi`` or ``command:<absolute path>`` (any executable)."""
    text = string(value)
    if registry.named(text) is not None:
        return text
    if text.startswith(COMMAND_PREFIX):
        program = Path(text.removeprefix(COMMAND_PREFIX))
        if program.is_absolute() and ".." not in program.parts:
            return text
        raise ValueError(f"command: needs an absolute path without '..', got {str(program)!r}")
    raise ValueError(
        f"must be one of {', '.join(registry.names())} or command:<path>, got {text!r}"
    )


def service_url(value: object) -> str:
    """An ``https`` origin, or ``http`` to a loopback host (never plain http elsewhere)."""
    text = string(value)
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError(f"{text!r} must be an http(s) origin")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{text!r} must be an origin only (no path, query or user)")
    if parts.scheme == "http" and not is_loopback_host(host):
        raise ValueError(f"plain http is refused for {host}: use https (http only on loopback)")
    return text


def project_id(value: object) -> str:
    text = string(value)
    if not text or len(text) > 64 or not all(c.isalnum() or c in "_.-" for c in text):
        raise ValueError(f"{text!r} is not a project id")
    return text


class Binding(Settings):
    """``[run.binding]``: the coordinator the loop works for, and the credential it uses."""

    service_url: str = setting(service_url)
    project_id: str = setting(project_id)
    project_name: str | None = setting(optional(string), default=None)
    # None: <state>/impl/coordinator/credentials.toml (the seed's place)
    credential_file: Path | None = setting(optional(absolute_path), default=None)


class CanaryBinding(Settings):
    """``[run.canary_binding]``: a second project the loop serves beside the main one, on the
    same coordinator; ``next`` asks it first each poll."""

    service_url: str = setting(service_url)  # must equal [run.binding]'s
    project_id: str = setting(project_id)  # must differ from [run.binding]'s
    project_name: str | None = setting(optional(string), default=None)
    # None: [run.binding]'s credential file (one implementer principal serves both projects)
    credential_file: Path | None = setting(optional(absolute_path), default=None)
    mirror: Path | None = setting(
        optional(absolute_path), default=None
    )  # <state>/mirror-canary.git


class ReviewerBinding(Settings):
    """``[run.reviewer_binding]``: the reviewer's own credential (another principal than the
    implementer's: a reviewer must not have contributed to the task it reviews), and where it
    reviews (each key none: ``[run.binding]``'s)."""

    # None: <state>/rev/coordinator/credentials.toml
    credential_file: Path | None = setting(optional(absolute_path), default=None)
    service_url: str | None = setting(optional(service_url), default=None)
    project_id: str | None = setting(optional(project_id), default=None)
    project_name: str | None = setting(optional(string), default=None)


class RunSettings(Settings):
    """``[run]``: the live loop (agentc-supervisor run)."""

    poll_seconds: float = setting(number(minimum=1), default=60.0)
    # How many launches run at once (None: derived from the machine, loop/slots.py), and how
    # many of them only reviews may take (with [run] reviewer).
    launches: int | None = setting(optional(integer(minimum=1, maximum=256)), default=None)
    review_slots: int = setting(integer(minimum=0), default=0)
    harness: str = setting(harness_name, default="claude")
    model: str = setting(string, default="default")
    effort: str = setting(string, default="high")
    reviewer_harness: str = setting(harness_name, default="claude")
    reviewer_model: str = setting(string, default="default")
    min_free_mib: int = setting(integer(minimum=0), default=20480)
    min_free_memory_mib: int = setting(integer(minimum=0), default=1024)
    branch: str = setting(string, default="main")
    allow_insecure_loopback: bool = setting(boolean, default=False)
    git_name: str = setting(string, default="agentc implementer")
    git_email: str = setting(string, default="agentc-impl@agentc.invalid")
    reviewer: bool = setting(boolean, default=False)
    review_attempts: int = setting(integer(minimum=1), default=3)
    review_minutes: float = setting(number(above=0), default=45.0)
    budget_minutes: float = setting(number(above=0), default=240.0)
    drain_seconds: float = setting(number(minimum=0), default=30.0)
    events_stale_seconds: float = setting(number(minimum=1), default=900.0)
    checkpoint_stale_minutes: float = setting(number(above=0), default=60.0)
    heartbeat_seconds: float = setting(number(minimum=1), default=30.0)
    empty_exit_limit: int = setting(integer(minimum=0), default=2)
    empty_exit_total_limit: int = setting(integer(minimum=0), default=5)
    # The largest patch text sent with a submission for the console (the file list always goes)
    patch_max_kib: int = setting(integer(minimum=0, maximum=900), default=512)
    steps_max_kib: int = setting(integer(minimum=1, maximum=900), default=256)
    binding: Binding | None = setting(optional(section(Binding)), default=None)
    reviewer_binding: ReviewerBinding | None = setting(
        optional(section(ReviewerBinding)), default=None
    )
    canary_binding: CanaryBinding | None = setting(optional(section(CanaryBinding)), default=None)


class Fallback(Settings):
    """``[health.fallback]``: the vendor tried when the primary is unusable."""

    harness: str = setting(harness_name)
    model: str = setting(string)
    effort: str = setting(string, default="high")


def quiet_window(value: object) -> str:
    text = string(value)
    parse_window(text)  # ValueError naming the problem
    return text


class HealthSettings(Settings):
    """``[health]``: admission (kill switch, daily caps) and vendor health."""

    kill_switch: Path | None = setting(optional(absolute_path), default=None)  # <state>/kill-switch
    # The local-time window in which new work may be claimed (core.quiet; None: always).
    quiet_hours: str | None = setting(optional(quiet_window), default=None)
    # The gateway's ledger and vendor state, read only (None: <state>/gateway/ledger.jsonl and
    # <state>/vendors.json).
    ledger: Path | None = setting(optional(absolute_path), default=None)
    vendors: Path | None = setting(optional(absolute_path), default=None)
    # The gateway's configuration, read to check each gateway vendor's credential file at
    # admission (None: /etc/agentc/gateway.toml when it exists; loop/signin.py).
    gateway_config: Path | None = setting(optional(absolute_path), default=None)
    exhausted_minutes: float = setting(number(above=0), default=60.0)
    token_lifetime_days: int = setting(integer(minimum=1), default=365)
    expiry_warn_days: int = setting(integer(minimum=0), default=14)
    implementer_daily_usd: float = setting(number(minimum=0), default=150.0)  # 0: no cap
    reviewer_daily_usd: float = setting(number(minimum=0), default=50.0)  # 0: no cap
    # What each running launch of a model harness is counted as still spending under its
    # role's daily cap (less what the ledger already has of it).
    launch_reserve_usd: float = setting(number(minimum=0), default=10.0)
    fallback: Fallback | None = setting(optional(section(Fallback)), default=None)


class ProjectSetup(Settings):
    """``[setup.<project-id>]``: where the project's code comes from, and its setup command."""

    repository_url: str | None = setting(optional(string), default=None)
    branch: str | None = setting(optional(string), default=None)  # None: [run] branch
    command: list[str] = setting(list_of(string), default_factory=list)
    cache_paths: list[Path] = setting(list_of(absolute_path), default_factory=list)
    timeout_seconds: int = setting(integer(minimum=1), default=900)


def staging_url(value: object) -> str:
    """A staging coordinator's origin: the relay's URL rules (no userinfo, IPv6 or short IPv4;
    loopback only on an explicit port >= 1024), then an https origin or http on loopback."""
    text = string(value)
    url_relay_address(text, what="the staging coordinator")
    return service_url(text)


class Verification(Settings):
    """``[verification.<project-id>]``: reviewer launches of the project are verifying: the
    loop signs in to this staging coordinator with the login and hands the reviewer's candidate
    commands only the session (loop/verification.py)."""

    url: str = setting(staging_url)
    # {"username", "password"} of a person on the staging coordinator; the loop's own file
    # (mode 0600), hidden from the launch (an empty tmpfs over its directory).
    login_file: Path = setting(absolute_path)
    browser: Path | None = setting(optional(absolute_path), default=None)  # CHROME_BIN


class PriceSettings(Settings):
    """``[prices.<model>]``: USD per million tokens, merged over the built-in table."""

    input: float = setting(number(minimum=0))
    cached_input: float = setting(number(minimum=0))
    output: float = setting(number(minimum=0))


def project_table(cls: type[S]) -> Check[dict[str, S]]:
    """A table of ``cls`` sections named by project id (``[setup.<project-id>]``,
    ``[verification.<project-id>]``)."""
    tables = table_of(section(cls), kind="project")

    def checked(value: object) -> dict[str, S]:
        converted = tables(value)
        for name in converted:
            project_id(name)
        return converted

    return checked


def prices_table(value: object) -> dict[str, PriceSettings]:
    return table_of(section(PriceSettings), kind="model")(value)
