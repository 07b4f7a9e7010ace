"""The one settings model of agent-coordinator-server."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentc.core.addresses import is_loopback_host
from agentc.core.errors import ConfigError
from agentc.core.model import AGENT_TASK_WEEKLY_BUDGET_DEFAULT

DEFAULT_LISTEN = "127.0.0.1:8080"


def parse_listen(value: str) -> tuple[str, int]:
    """`host:port` on a loopback address; a TLS proxy fronts the service for the world."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"--listen: {value!r} is not HOST:PORT")
    host = host.strip("[]")
    if not is_loopback_host(host):
        raise ConfigError(
            f"--listen: {host} is not a loopback address; the coordinator listens on loopback "
            "only (127.0.0.1 or ::1) and a TLS proxy such as Caddy serves it to the network"
        )
    return host, int(port_text)


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    database: str
    public_origin: str = "http://127.0.0.1:8080"
    listen: str = DEFAULT_LISTEN
    allow_insecure_loopback: bool = False
    canary_principals: frozenset[str] = frozenset()
    agent_task_weekly_budget: int = Field(AGENT_TASK_WEEKLY_BUDGET_DEFAULT, ge=0, le=10000)
    json_body_limit_bytes: int = Field(1024 * 1024, ge=1024, le=1024 * 1024)

    @field_validator("public_origin")
    @classmethod
    def _origin(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) origin")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            raise ValueError(f"{value!r} must be an origin only (scheme, host, port)")
        return f"{parts.scheme}://{parts.netloc}"

    @model_validator(mode="after")
    def _listen(self) -> ServerSettings:
        parse_listen(self.listen)
        return self

    def check_serving(self) -> None:
        """The transport rules for serving (host commands such as init-admin need none)."""
        parts = urlsplit(self.public_origin)
        if parts.scheme == "http":
            if not is_loopback_host(parts.hostname or ""):
                raise ConfigError(
                    f"--public-origin {self.public_origin} is plain http off loopback; use "
                    "https behind a TLS proxy"
                )
            if not self.allow_insecure_loopback:
                raise ConfigError(
                    f"--public-origin {self.public_origin} is plain http; pass "
                    "--allow-insecure-loopback to allow it on loopback"
                )

    @property
    def https(self) -> bool:
        return self.public_origin.startswith("https://")
