"""Gateway configuration (TOML, validated; unknown keys refused). See docs/gateway.md."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentc.core.errors import ConfigError
from agentc.supervisor.gateway.ledger import Caps
from agentc.supervisor.gateway.prices import DEFAULT_PRICES, Price


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpstreamConfig(_Strict):
    api: Literal["anthropic", "openai"]
    base_url: str
    credential_file: Path


class CapsConfig(_Strict):
    launch_usd: float | None = Field(default=None, ge=0)
    task_usd: float | None = Field(default=None, ge=0)
    day_usd: float | None = Field(default=None, ge=0)


class PriceConfig(_Strict):
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    cache_read: float = Field(ge=0)


class GatewayConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8788, ge=0, le=65535)
    unix_socket: Path | None = None  # listen here instead of host:port (the relay's end)
    control_socket: Path
    ledger: Path
    vendors: Path
    log: Path | None = None  # JSON lines; stderr when unset
    exhausted_minutes: int = Field(default=60, ge=1)
    upstream_timeout_s: float = Field(default=600.0, gt=0)
    caps: CapsConfig = Field(default_factory=CapsConfig)
    upstreams: dict[str, UpstreamConfig]
    prices: dict[str, PriceConfig] = Field(default_factory=dict)

    def cap_limits(self) -> Caps:
        return Caps(self.caps.launch_usd, self.caps.task_usd, self.caps.day_usd)

    def price_table(self) -> dict[str, Price]:
        table = dict(DEFAULT_PRICES)
        for model, p in self.prices.items():
            table[model] = Price(p.input, p.output, p.cache_write, p.cache_read)
        return table


def load_config(path: Path) -> GatewayConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read gateway config: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{path}: invalid gateway config: {problems}") from None
