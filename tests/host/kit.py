"""The host tests' kit: ``agentc-host`` run as a subprocess (the real CLI), a ``host.toml`` in a
folder, and readers of what setup recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HOST = str(Path(sys.executable).parent / "agentc-host")


def host(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HOST, "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
    )


def write_settings(path: Path, text: str = "", **top: str) -> Path:
    """A host.toml: ``top`` as top-level string keys, then ``text`` (tables)."""
    lines = [f'{key} = "{value}"' for key, value in top.items()]
    path.write_text("\n".join(lines) + "\n" + text)
    return path


def record(root: Path, state: str = "/var/lib/agentc") -> dict[str, Any]:
    """The setup record under ``root`` (a prefix) for the state directory ``state``."""
    data: dict[str, Any] = json.loads((root / state.lstrip("/") / "host-setup.json").read_text())
    return data


def mode(path: Path) -> int:
    return os.lstat(path).st_mode & 0o7777


def tree(root: Path) -> set[str]:
    """Every path below ``root``, relative, directories included."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}
