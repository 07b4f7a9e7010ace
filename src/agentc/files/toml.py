"""Load a TOML settings file with one error format: ``<file>: <problem>`` (a ConfigError).

Every program's settings file (``supervisor.toml``, the gateway's, the client's binding and
credentials) is read here: a missing file, an unreadable one, bad UTF-8 or bad TOML each give one
line naming the file, and nothing is half-loaded.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
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
