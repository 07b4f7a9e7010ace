"""The ``--budget`` grammar: ``wall=3600s,syscalls=1e7,write_bytes=10G,fork=1000``.

The key set is closed: a typo'd key is an error, never silently dropped. Numbers saturate at
the u64 maximum like the original (a huge budget means "effectively unlimited", not an error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentc.agentns.errors import BudgetError

U64_MAX = 2**64 - 1

#: The budget keys, in the order the launcher reports them.
BUDGET_KEYS: tuple[str, ...] = ("wall", "syscalls", "write_bytes", "fork")

_DIGITS = re.compile(r"[0-9]+")
_WALL_UNITS = {"s": 1, "m": 60, "h": 3600, "": 1}
_IEC_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


@dataclass(frozen=True)
class Budget:
    """A parsed budget. ``None`` means the key was not given."""

    raw: str
    wall_s: int | None = None
    syscalls: int | None = None
    write_bytes: int | None = None
    fork: int | None = None

    def given(self) -> tuple[str, ...]:
        """The keys present in the spec, in :data:`BUDGET_KEYS` order."""
        values = {
            "wall": self.wall_s,
            "syscalls": self.syscalls,
            "write_bytes": self.write_bytes,
            "fork": self.fork,
        }
        return tuple(k for k in BUDGET_KEYS if values[k] is not None)


def _sat(n: int) -> int:
    return min(n, U64_MAX)


def _uint(text: str) -> int:
    # Only ASCII digits: int() alone would accept "+5", " 5", "5_0" and other scripts' digits.
    if not _DIGITS.fullmatch(text):
        raise ValueError("expected an unsigned integer")
    return _sat(int(text))


def _parse_wall(value: str) -> int:
    if value.endswith("ms"):
        raise ValueError("millisecond budgets unsupported; use whole seconds")
    unit = value[-1:] if value[-1:] in ("s", "m", "h") else ""
    number = value[: len(value) - len(unit)]
    if not number:
        raise ValueError("missing number before the unit")
    if not _DIGITS.fullmatch(number):
        raise ValueError("expected whole seconds with an optional unit s, m or h")
    return _sat(int(number) * _WALL_UNITS[unit])


def _parse_count(value: str) -> int:
    # "<int>" or "<int>e<int>"; only lowercase e, as in the original ("1E7" fails).
    mantissa, sep, exponent = value.partition("e")
    m = _uint(mantissa)
    if not sep:
        return m
    e = _uint(exponent)
    if m == 0:
        return 0
    if e > 20:  # 10**20 > u64 max already; avoid building enormous ints
        return U64_MAX
    return _sat(m * 10**e)


def _parse_bytes(value: str) -> int:
    unit = value[-1:] if value[-1:] in ("K", "M", "G", "T") else ""
    number = value[: len(value) - len(unit)]
    if not _DIGITS.fullmatch(number):
        raise ValueError("expected bytes as an integer with an optional suffix K, M, G or T")
    return _sat(int(number) * _IEC_UNITS[unit])


_PARSERS = {
    "wall": _parse_wall,
    "syscalls": _parse_count,
    "write_bytes": _parse_bytes,
    "fork": _parse_count,
}


def parse_budget(spec: str) -> Budget:
    """Parse a budget spec; raise :class:`BudgetError` naming the bad key or value."""
    if not spec.strip():
        raise BudgetError("budget spec is empty")
    values: dict[str, int] = {}
    for pair in spec.split(","):
        pair = pair.strip()
        if not pair:
            continue  # a trailing comma or ",," is harmless
        key, sep, value = pair.partition("=")
        if not sep:
            raise BudgetError(f'expected key=value, got "{pair}"')
        key, value = key.strip(), value.strip()
        parser = _PARSERS.get(key)
        if parser is None:
            raise BudgetError(f'unknown budget key "{key}" (want one of: {", ".join(BUDGET_KEYS)})')
        try:
            if not value:
                raise ValueError("empty value")
            values[key] = parser(value)  # a repeated key: the last value wins
        except ValueError as exc:
            raise BudgetError(f'bad value for {key}="{value}": {exc}') from None
    if not values:
        raise BudgetError("budget spec is empty")
    return Budget(
        raw=spec,
        wall_s=values.get("wall"),
        syscalls=values.get("syscalls"),
        write_bytes=values.get("write_bytes"),
        fork=values.get("fork"),
    )
