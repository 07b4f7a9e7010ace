"""Load a TOML settings file with one error format: ``<file>: <problem>`` (a ConfigError), and
write one.

Every program's settings file (``supervisor.toml``, the gateway's, the client's binding and
credentials) is read here: a missing file, an unreadable one, bad UTF-8 or bad TOML each give one
line naming the file, and nothing is half-loaded. Every settings file the project writes
(``agentc up``'s configs, the loop's binding, a credentials file) is written by
:func:`dump_toml`, which escapes every string, so any path (quotes, backslashes, newlines,
non-ASCII) reads back as it was.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from agentc.core.errors import ConfigError


def parse_toml(text: bytes, path: Path | str) -> dict[str, Any]:
    """Parse ``text`` (the content of ``path``) or raise a ConfigError naming the file."""
    try:
        return tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def load_toml(path: Path, *, what: str = "settings file") -> dict[str, Any]:
    """Read and parse ``path``; a missing or unreadable file names itself and ``what`` it is."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: the {what} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    return parse_toml(raw, path)


# --- writing: the one TOML writer of every settings file the project writes -------------------

_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters escaped,
    everything else (non-ASCII included) as it is, so any string reads back unchanged."""
    out = []
    for char in text:
        if char in _SHORT:
            out.append(_SHORT[char])
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A bare key when it is one (``A-Za-z0-9_-``), else a quoted key."""
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else toml_string(key)


def toml_value(value: object) -> str:
    """A string, path, boolean, integer, finite float, list or table as a TOML value."""
    if isinstance(value, str | PurePath):
        return toml_string(str(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dump_toml(tables: Mapping[tuple[str, ...], Mapping[str, object]]) -> bytes:
    """A TOML document: each table's name is the tuple of its keys (``()``: the top level, which
    comes first; ``("setup", name)``: ``[setup.<name>]``). Tables hold values, never tables."""
    lines: list[str] = []
    for name, table in sorted(tables.items(), key=lambda item: bool(item[0])):
        if name:
            lines += ["", "[" + ".".join(toml_key(part) for part in name) + "]"]
        lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in table.items()]
    return ("\n".join(lines).lstrip("\n") + "\n").encode()
