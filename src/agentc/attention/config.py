"""The settings of ``agentc-attention`` (``attention.toml``), declared with
:mod:`agentc.files.settings`: unknown keys are refused and every problem is reported together as
``<file>: <dotted.key>: <problem>`` (docs/attention.md lists the keys)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from agentc.client.config import normalize_origin
from agentc.client.errors import SetupRequired
from agentc.core.addresses import is_loopback_host
from agentc.core.errors import ConfigError
from agentc.files.options import default_config
from agentc.files.settings import (
    Settings,
    absolute_path,
    absolute_paths,
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

DEFAULT_CONFIG = default_config("attention")
SmtpTls = Literal["starttls", "tls", "none"]
SMTP_TLS: tuple[SmtpTls, ...] = ("starttls", "tls", "none")
SMTP_PORTS: dict[SmtpTls, int] = {"starttls": 587, "tls": 465, "none": 25}


def _text(value: object) -> str:
    text = string(value).strip()
    if not text:
        raise ValueError("must not be empty")
    return text


def http_url(value: object) -> str:
    """An http(s) URL with a host and no user name or password; plain http only to a loopback
    host (pages and the webhook carry what is wrong on the host)."""
    text = _text(value)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http(s) URL with a host, got {text!r}")
    if parts.username or parts.password:
        raise ValueError("must not carry a user name or password (use token_file)")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError(f"plain http is allowed only to a loopback host, got {parts.hostname}")
    return text.rstrip("/")


def _topic(value: object) -> str:
    text = _text(value)
    if not all(c.isalnum() or c in "-_" for c in text) or len(text) > 64:
        raise ValueError("an ntfy topic is 1-64 of [A-Za-z0-9_-]")
    return text


class NtfyConfig(Settings):
    """``[ntfy]``: pages as ntfy messages (an HTTP POST to ``url/topic``)."""

    url: str = setting(http_url, default="https://ntfy.sh")
    topic: str = setting(_topic)
    token_file: Path | None = setting(optional(absolute_path), default=None)


class WebhookConfig(Settings):
    """``[webhook]``: pages as a JSON POST (Slack-compatible ``text`` included)."""

    url: str = setting(http_url)
    token_file: Path | None = setting(optional(absolute_path), default=None)


class LogConfig(Settings):
    """``[log]``: pages appended as JSON lines to a file (``agentc up``'s, or a test's)."""

    path: Path = setting(absolute_path)


class ChecksConfig(Settings):
    """``[checks]``: what ``agentc-attention check`` looks at (0 turns a limit off)."""

    heartbeat: Path | None = setting(optional(absolute_path), default=None)
    heartbeat_max_age_seconds: float = setting(number(minimum=10), default=300.0)
    vendor_limit_minutes: float = setting(number(minimum=0), default=30.0)
    next_budget_seconds: float = setting(number(above=0, maximum=120), default=10.0)
    max_interventions: int = setting(integer(minimum=0), default=0)
    neglect_days: float = setting(number(minimum=0), default=3.0)
    integrator_reports: Path | None = setting(optional(absolute_path), default=None)
    target_block_minutes: float = setting(number(minimum=0), default=30.0)
    target_repage_minutes: float = setting(number(minimum=1), default=360.0)
    lease_overdue_minutes: float = setting(number(minimum=0), default=15.0)
    attempt_budget_minutes: float = setting(number(above=0), default=240.0)
    egress_log: Path | None = setting(optional(absolute_path), default=None)
    egress_denials: int = setting(integer(minimum=0), default=20)
    egress_window_minutes: float = setting(number(minimum=1), default=60.0)
    backups: bool = setting(boolean, default=False)


class MailConfig(Settings):
    """``[mail]``: the digest by SMTP. The certificate and host name are always verified."""

    smtp_host: str = setting(_text)
    smtp_port: int | None = setting(optional(integer(minimum=1, maximum=65535)), default=None)
    smtp_tls: SmtpTls | None = setting(optional(one_of(SMTP_TLS)), default=None)
    smtp_user: str | None = setting(optional(_text), default=None)
    smtp_password_file: Path | None = setting(optional(absolute_path), default=None)
    ca_file: Path | None = setting(optional(absolute_path), default=None)
    mail_from: str = setting(_text)
    mail_to: list[str] = setting(list_of(_text))
    timeout_seconds: float = setting(number(above=0, maximum=300), default=30.0)

    def tls(self) -> SmtpTls:
        """starttls once a password file is set, otherwise none, unless set."""
        if self.smtp_tls is not None:
            return self.smtp_tls
        return "starttls" if self.smtp_password_file is not None else "none"

    def port(self) -> int:
        return self.smtp_port or SMTP_PORTS[self.tls()]

    def cross_checks(self) -> Iterable[tuple[str, str]]:
        if not self.mail_to:
            yield "mail_to", "name at least one address"
        if (self.smtp_user is None) != (self.smtp_password_file is None):
            yield "smtp_user", "smtp_user and smtp_password_file go together"
        if self.smtp_password_file is not None and self.tls() == "none":
            yield "smtp_tls", "a login is refused without TLS: use starttls or tls"


class CanaryConfig(Settings):
    """``[canary]``: the end-to-end canary (a task in the canary project, waited for)."""

    project_id: str | None = setting(optional(_text), default=None)
    token_file: Path | None = setting(optional(absolute_path), default=None)
    harnesses: list[str] = setting(list_of(_text), default_factory=lambda: ["claude"])
    host: str | None = setting(optional(_text), default=None)
    priority: int = setting(integer(minimum=0, maximum=3), default=0)
    timeout_minutes: float = setting(number(above=0), default=90.0)
    poll_seconds: float = setting(number(above=0, maximum=3600), default=20.0)
    ledgers: list[Path] = setting(absolute_paths, default_factory=list)
    report: bool = setting(boolean, default=True)


class ScheduleConfig(Settings):
    """``[schedule]``: how often ``agentc up``'s built-in scheduler runs each job (seconds)."""

    check_seconds: float = setting(number(minimum=1), default=600.0)
    digest_seconds: float = setting(number(minimum=1), default=86400.0)
    canary_seconds: float = setting(number(minimum=1), default=86400.0)


class AttentionConfig(Settings):
    """Every ``agentc-attention`` setting; ``origin``, ``project_id`` and ``token_file`` are
    required."""

    origin: str = setting(_text)
    project_id: str = setting(_text)
    token_file: Path = setting(absolute_path)
    allow_insecure_loopback: bool = setting(boolean, default=False)
    state_dir: Path = setting(absolute_path, default=Path("/var/lib/agentc/attention"))
    ntfy: NtfyConfig | None = setting(optional(section(NtfyConfig)), default=None)
    webhook: WebhookConfig | None = setting(optional(section(WebhookConfig)), default=None)
    log: LogConfig | None = setting(optional(section(LogConfig)), default=None)
    schedule: ScheduleConfig = setting(section(ScheduleConfig), default_factory=ScheduleConfig)
    checks: ChecksConfig = setting(section(ChecksConfig), default_factory=ChecksConfig)
    mail: MailConfig | None = setting(optional(section(MailConfig)), default=None)
    canary: CanaryConfig = setting(section(CanaryConfig), default_factory=CanaryConfig)

    def coordinator_origin(self) -> str:
        try:
            return normalize_origin(
                self.origin, allow_insecure_loopback=self.allow_insecure_loopback, what="origin"
            )
        except SetupRequired:
            raise ConfigError(
                "origin: plain http to a loopback coordinator needs allow_insecure_loopback = true"
            ) from None

    def state_file(self) -> Path:
        return self.state_dir / "state.json"
