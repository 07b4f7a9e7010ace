"""Model prices (USD per million tokens) and the pricing of one call.

The table holds list prices; ``[prices.<model>]`` in the gateway config overrides or extends
it. A model is looked up exactly, then by its canonical id (a ``[1m]`` context suffix and a
``-YYYYMMDD`` date suffix dropped: ``claude-haiku-4-5-20251001`` uses ``claude-haiku-4-5``),
then by the longest table key it starts with. An unknown model is *unpriced*: the ledger row
gets ``usd: null`` and ``usd_unpriced_reason``, and caps count it at ``CONSERVATIVE`` (the
highest rate of each kind in the table), so an unknown model cannot slip past a cap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_write: float
    cache_read: float


@dataclass(frozen=True)
class Tokens:
    """One call's tokens: ``input`` is fresh (uncached) input."""

    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0


@dataclass(frozen=True)
class Cost:
    usd: float | None
    usd_for_caps: float
    priced_model: str | None
    unpriced_reason: str | None


# Cache writes are priced at 1.25x input (the providers' 5-minute cache write rate).
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-5-5": Price(input=4.0, output=20.0, cache_write=5.0, cache_read=0.20),
    "claude-sonnet-5": Price(input=2.0, output=10.0, cache_write=2.5, cache_read=0.20),
    "claude-haiku-4-5": Price(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
    "gpt-5": Price(input=1.25, output=10.0, cache_write=1.25, cache_read=0.125),
}

_DATE = re.compile(r"-\d{8}$")


def conservative(table: Mapping[str, Price]) -> Price:
    """The highest rate of each kind: what an unpriced call counts as against caps."""
    prices = list(table.values()) or list(DEFAULT_PRICES.values())
    return Price(
        input=max(p.input for p in prices),
        output=max(p.output for p in prices),
        cache_write=max(p.cache_write for p in prices),
        cache_read=max(p.cache_read for p in prices),
    )


def canonical(model: str) -> str:
    name = model.strip().lower()
    if name.endswith("]") and "[" in name:
        name = name[: name.rindex("[")]
    return _DATE.sub("", name)


def lookup(model: str, table: Mapping[str, Price]) -> tuple[str, Price] | None:
    if model in table:
        return model, table[model]
    name = canonical(model)
    if name in table:
        return name, table[name]
    prefixes = [key for key in table if name.startswith(key + "-")]
    if prefixes:
        key = max(prefixes, key=len)
        return key, table[key]
    return None


def dollars(tokens: Tokens, price: Price) -> float:
    return (
        tokens.input * price.input
        + tokens.output * price.output
        + tokens.cache_write * price.cache_write
        + tokens.cache_read * price.cache_read
    ) / 1e6


def price_call(model: str | None, tokens: Tokens, table: Mapping[str, Price]) -> Cost:
    found = lookup(model, table) if model else None
    if found is None:
        reason = f"no price for model {model!r}" if model else "the provider reported no model"
        return Cost(None, dollars(tokens, conservative(table)), None, reason)
    key, price = found
    usd = dollars(tokens, price)
    return Cost(usd, usd, key, None)
