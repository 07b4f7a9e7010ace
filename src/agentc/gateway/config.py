"""Gateway configuration (TOML, checked; unknown keys refused). See docs/gateway.md.

Declared with :mod:`agentc.files.settings`, the supervisor's mechanism: one loader, one error
format (``<file>: <key>: <problem>; ...``, every problem together), each default in its field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from agentc.files.settings import (
    Settings,
    integer,
    number,
    one_of,
    optional,
    path,
    section,
    setting,
    string,
    table_of,
)
from agentc.gateway.breakers import BreakerLimits
from agentc.gateway.ledger import Caps
from agentc.gateway.prices import DEFAULT_PRICES, Price

Api = Literal["anthropic", "openai"]
APIS: tuple[Api, ...] = ("anthropic", "openai")
_USD = number(minimum=0)
MiB = 1024 * 1024


class UpstreamConfig(Settings):
    api: Api = setting(one_of(APIS))
    base_url: str = setting(string)
    credential_file: Path = setting(path)


class CapsConfig(Settings):
    launch_usd: float | None = setting(optional(_USD), default=None)
    task_usd: float | None = setting(optional(_USD), default=None)
    day_usd: float | None = setting(optional(_USD), default=None)


_BREAKERS = BreakerLimits()  # the one home of the breakers' defaults
_SHARE = number(minimum=0, maximum=1)


class BreakersConfig(Settings):
    """``[breakers]``: the loop breakers' thresholds (docs/gateway.md "Loop breakers"; 0: off)."""

    same_request: int = setting(integer(minimum=0), default=_BREAKERS.same_request)
    no_progress: int = setting(integer(minimum=0), default=_BREAKERS.no_progress)
    cache_storm_calls: int = setting(integer(minimum=0), default=_BREAKERS.cache_storm_calls)
    cache_storm_share: float = setting(_SHARE, default=_BREAKERS.cache_storm_share)
    cache_established: float = setting(_SHARE, default=_BREAKERS.cache_established)
    cache_min_prompt_tokens: int = setting(
        integer(minimum=0), default=_BREAKERS.cache_min_prompt_tokens
    )


class PriceConfig(Settings):
    input: float = setting(_USD)
    output: float = setting(_USD)
    cache_write: float = setting(_USD)
    cache_read: float = setting(_USD)


class GatewayConfig(Settings):
    host: str = setting(string, default="127.0.0.1")
    port: int = setting(integer(minimum=0, maximum=65535), default=8788)
    # Listen here instead of host:port (the relay's end).
    unix_socket: Path | None = setting(optional(path), default=None)
    control_socket: Path = setting(path)
    ledger: Path = setting(path)
    vendors: Path = setting(path)
    log: Path | None = setting(optional(path), default=None)  # JSON lines; stderr when unset
    # One event log per launch (agentc.files.launchlog); none when unset.
    launch_logs: Path | None = setting(optional(path), default=None)
    exhausted_minutes: int = setting(integer(minimum=1), default=60)
    upstream_timeout_s: float = setting(number(above=0), default=600.0)
    # Limits one launch cannot exceed (docs/gateway.md, "Limits").
    max_body_bytes: int = setting(integer(minimum=1), default=32 * MiB)
    launch_concurrency: int = setting(integer(minimum=1), default=16)
    drain_timeout_s: float = setting(number(above=0), default=120.0)
    drain_max_bytes: int = setting(integer(minimum=0), default=16 * MiB)
    estimate_output_tokens: int = setting(integer(minimum=1), default=128_000)
    caps: CapsConfig = setting(section(CapsConfig), default_factory=CapsConfig)
    breakers: BreakersConfig = setting(section(BreakersConfig), default_factory=BreakersConfig)
    upstreams: dict[str, UpstreamConfig] = setting(table_of(section(UpstreamConfig)))
    prices: dict[str, PriceConfig] = setting(table_of(section(PriceConfig)), default_factory=dict)

    def cap_limits(self) -> Caps:
        return Caps(self.caps.launch_usd, self.caps.task_usd, self.caps.day_usd)

    def breaker_limits(self) -> BreakerLimits:
        b = self.breakers
        return BreakerLimits(
            b.same_request,
            b.no_progress,
            b.cache_storm_calls,
            b.cache_storm_share,
            b.cache_established,
            b.cache_min_prompt_tokens,
        )

    def price_table(self) -> dict[str, Price]:
        table = dict(DEFAULT_PRICES)
        for model, p in self.prices.items():
            table[model] = Price(p.input, p.output, p.cache_write, p.cache_read)
        return table


def load_config(path: Path) -> GatewayConfig:
    return GatewayConfig.load(path, what="gateway configuration")
