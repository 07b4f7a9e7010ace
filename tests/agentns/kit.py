"""Helpers shared by the agentns-claude tests."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

BIN_DIR = Path(sys.executable).parent
_found = BIN_DIR / "agentns-claude"
LAUNCHER = str(_found) if _found.exists() else (shutil.which("agentns-claude") or "")
BOOTED = os.path.exists("/proc/self/agent_session")


def child_env(stdout: str) -> dict[str, str]:
    """Parse the output of ``env`` run as the wrapped command."""
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def is_hex32(value: str) -> bool:
    return len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 :].split()[0] != b"Z"


def pids_with_cmdline(fragment: str) -> list[int]:
    """Live processes whose command line contains ``fragment`` (e.g. a unique intent tag)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if fragment.encode() in cmdline and alive(int(name)):
            found.append(int(name))
    return found


def wait_until(pred: Callable[[], bool], timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def read_pids(path: Path, timeout: float = 10.0) -> Sequence[int]:
    """Pids written one per line by a wrapped shell (waits until the file has content)."""
    assert wait_until(lambda: path.exists() and path.read_text().strip() != "", timeout)
    return [int(x) for x in path.read_text().split()]
