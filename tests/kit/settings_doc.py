"""A settings class against its docs page: every key listed, each default as the page shows it.

The pages show a default as TOML would write it, in backticks (`"main"`, `30`, `false`,
`[]`), `none` for an unset optional, `required` for a key without a default.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[2] / "docs"


def render(value: Any) -> str:
    """A default as the docs show it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer() and "." not in str(int(value)):
        return f"`{int(value)}`"
    if isinstance(value, str | Path):
        return f'`"{value}"`'
    if isinstance(value, dict):
        inner = ", ".join(f'{k} = "{v}"' for k, v in value.items())
        return "`{" + inner + "}`"
    if isinstance(value, list):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    return f"`{value}`"


def default(item: dataclasses.Field[Any]) -> Any:
    """A field's default, or ``"required"``."""
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return "required"


def shown(item: dataclasses.Field[Any]) -> str:
    value = default(item)
    return "required" if value == "required" else render(value)


def fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls)}


def key_rows(page: str, heading: str) -> dict[str, str]:
    """The ``| `key` | default |`` rows under ``heading`` (a ``## `` or ``### `` title) of
    docs/``page``, up to the next heading: key -> default as shown."""
    rows: dict[str, str] = {}
    inside = False
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            inside = line.lstrip("#").strip() == heading
        elif inside and (row := re.match(r"^\| (`[^|]+`) \| ([^|]+) \|", line)):
            rows[row[1]] = row[2].strip()
    return rows
