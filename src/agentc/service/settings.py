"""The one settings model of agent-coordinator-server, and the home of its defaults.

Each operator setting is a global option of the command line (``--public-origin``) and the
environment variable :data:`ENVIRONMENT` names (``COORDINATOR_PUBLIC_ORIGIN``); the command line
takes its defaults, help and ranges from here, and reads no other variable.
docs/operator-guide.md lists them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentc.core.addresses import is_localhost_name, is_loopback_host
from agentc.core.errors import ConfigError
from agentc.core.model import AGENT_TASK_WEEKLY_BUDGET_DEFAULT
from agentc.store.engine import is_postgres_url

DEFAULT_PORT = 8080
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
WEEKLY_BUDGET_RANGE = (0, 10000)
WORKERS_RANGE = (1, 64)
POOL_SIZE_RANGE = (1, 100)
POOL_OVERFLOW = 4  # connections a process may open beyond its pool size, briefly

# The operator settings and their environment variables (the other fields serve tests).
ENVIRONMENT = {
    "database": "COORDINATOR_DATABASE",
    "public_origin": "COORDINATOR_PUBLIC_ORIGIN",
    "listen": "COORDINATOR_LISTEN",
    "allow_insecure_loopback": "COORDINATOR_ALLOW_INSECURE_LOOPBACK",
    "canary_principals": "COORDINATOR_CANARY_PRINCIPALS",
    "agent_task_weekly_budget": "COORDINATOR_AGENT_TASK_WEEKLY_BUDGET",
    "trusted_proxy_header": "COORDINATOR_TRUSTED_PROXY_HEADER",
    "workers": "COORDINATOR_WORKERS",
    "database_pool_size": "COORDINATOR_DATABASE_POOL_SIZE",
    "backup_repository": "COORDINATOR_BACKUP_REPOSITORY",
}


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

    database: str = Field(
        description="SQLite file path (the default store) or a postgresql:// URL."
    )
    public_origin: str = Field(
        f"http://127.0.0.1:{DEFAULT_PORT}",
        description="The origin users and agents reach (https behind a TLS proxy).",
    )
    listen: str = Field(DEFAULT_LISTEN, description="Loopback HOST:PORT to listen on.")
    allow_insecure_loopback: bool = Field(
        False, description="Allow a plain http public origin on loopback (development)."
    )
    canary_principals: frozenset[str] = Field(
        frozenset(), description="Comma-separated agent names allowed the canary admission class."
    )
    agent_task_weekly_budget: int = Field(
        AGENT_TASK_WEEKLY_BUDGET_DEFAULT,
        ge=WEEKLY_BUDGET_RANGE[0],
        le=WEEKLY_BUDGET_RANGE[1],
        description="Agent-created tasks admitted per project per ISO week.",
    )
    trusted_proxy_header: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9-]{1,64}$",
        description="The header the TLS proxy sets to the client's address (e.g. "
        "X-Forwarded-For), read for sign-in throttling only from a loopback peer.",
    )
    workers: int = Field(
        1,
        ge=WORKERS_RANGE[0],
        le=WORKERS_RANGE[1],
        description="Service processes sharing the listening socket (PostgreSQL only; SQLite "
        "runs as one process).",
    )
    database_pool_size: int = Field(
        8,
        ge=POOL_SIZE_RANGE[0],
        le=POOL_SIZE_RANGE[1],
        description="Database connections each service process keeps (it may open "
        f"{POOL_OVERFLOW} more at a peak).",
    )
    backup_repository: str | None = Field(
        None,
        description="The backup repository (a private folder of verified snapshots): where "
        "the backup commands write and read unless given --repository, and whose status the "
        "console shows admins.",
    )
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
        """The transport and process rules for serving (host commands such as init-admin need
        none)."""
        if self.workers > 1 and not is_postgres_url(self.database):
            raise ConfigError(
                f"--workers {self.workers}: SQLite is served by one process (its single writer "
                "commits every mutation; a second process would contend for the file's write "
                "lock); use --workers 1 with SQLite, or PostgreSQL for several processes"
            )
        parts = urlsplit(self.public_origin)
        if parts.scheme == "http":
            host = parts.hostname or ""
            if not (is_loopback_host(host) or is_localhost_name(host)):
                raise ConfigError(
                    f"--public-origin {self.public_origin} is plain http off loopback; use "
                    "https behind a TLS proxy (or, on this machine alone, a name under "
                    ".localhost such as http://agentc-<random>.localhost:PORT)"
                )
            if not self.allow_insecure_loopback:
                raise ConfigError(
                    f"--public-origin {self.public_origin} is plain http; pass "
                    "--allow-insecure-loopback to allow it on loopback"
                )

    @property
    def https(self) -> bool:
        return self.public_origin.startswith("https://")

    @property
    def shared_origin(self) -> bool:
        """An http public origin on a loopback address or ``localhost``: every program on the
        machine may serve pages under that host, and a browser sends the console's cookies to
        all of them (a name of the console's own, under .localhost, is not shared)."""
        parts = urlsplit(self.public_origin)
        return parts.scheme == "http" and is_loopback_host(parts.hostname or "")

    @property
    def shared_origin_warning(self) -> str:
        return (
            f"the public origin {self.public_origin} is an address every program on this "
            "machine can serve pages at, and a browser sends the console's session cookie to "
            "all of them; give the console a name of its own (http://agentc-<random>.localhost"
            ":PORT, as `agentc up` does) or https"
        )
