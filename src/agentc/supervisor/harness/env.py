"""How a harness is pointed at a model endpoint, and how its settings files are written.

A harness reaches the model gateway's loopback address inside a launch (or a scripted provider
in tests) with a key (the launch's sentinel, never a real credential). Each adapter
(:mod:`agentc.supervisor.harness.registry`) says how, as a :class:`HarnessSetup`: environment
entries, files to write, extra flags. Both the launch layer
(``agentc.supervisor.launch.execute``) and the test helpers (``agentc.testing.harnesses``) build
their configuration through it; nothing in this module touches the network.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PROVIDER = "agentc"  # the name of the gateway's provider entry in a harness's own settings


@dataclass(frozen=True)
class ModelEndpoint:
    """Where a harness sends its model calls: a server root (no ``/v1``) and the key to use."""

    base_url: str
    key: str = field(repr=False)
    model: str | None = None  # None: the harness's own default
    # The most output tokens a call may ask for (the model policy's), None: the harness's own.
    max_output_tokens: int | None = None


@dataclass(frozen=True)
class HarnessSetup:
    """What one harness needs: environment entries, files to write, extra argv flags."""

    env: dict[str, str] = field(repr=False)
    files: dict[Path, str] = field(default_factory=dict, repr=False)
    args: tuple[str, ...] = ()


def root_url(base_url: str) -> str:
    return base_url.rstrip("/")


def write_files(harness_setup: HarnessSetup, *, exclusive: bool = False) -> None:
    """Write the setup's files 0600 (parents 0700); ``exclusive`` refuses an existing file or a
    symlink (a launch's fresh home), otherwise a file is replaced (a test's throwaway home)."""
    for path, text in harness_setup.files.items():
        _make_parents(path.parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        flags |= os.O_EXCL if exclusive else os.O_TRUNC
        fd = os.open(path, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text)


def _make_parents(path: Path) -> None:
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for item in reversed(missing):
        os.mkdir(item, 0o700)
        os.chmod(item, 0o700)
