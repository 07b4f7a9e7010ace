"""Model prices (USD per million tokens) and the one rule that turns usage into dollars.

Used only when a harness reports no dollars of its own (Codex never does; a killed Claude run
has no ``result``): the figure is then marked estimated. A dated model id such as
``claude-haiku-4-5-20251001`` is priced as ``claude-haiku-4-5``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input: float
    cached_input: float
    output: float


DEFAULT_PRICES: Mapping[str, Price] = {
    "claude-opus-5-5": Price(4.0, 0.20, 20.0),
    "claude-sonnet-5": Price(2.0, 0.20, 10.0),
    "claude-haiku-4-5": Price(1.0, 0.10, 5.0),
}

_DATED = re.compile(r"^(?P<base>.+?)-\d{8}$")


def price_key(model: str, prices: Mapping[str, Price]) -> str | None:
    """The table entry that prices ``model``: itself, or its undated base; None if unpriced."""
    if model in prices:
        return model
    match = _DATED.match(model)
    if match and match["base"] in prices:
        return match["base"]
    return None


def price_usage(
    input_tokens: int, cached_input_tokens: int, output_tokens: int, price: Price
) -> float:
    """Dollars for the given token counts, rounded to cents."""
    total = (
        input_tokens * price.input
        + cached_input_tokens * price.cached_input
        + output_tokens * price.output
    ) / 1e6
    return round(total, 2)
