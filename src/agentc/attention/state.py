"""The one private file of ``agentc-attention``: what is failing and was paged, the pages not
yet delivered, the first run (the neglect clock of a digest never read) and the canary results
the coordinator has accepted.

It is JSON, written atomically (mode 0600) after every change and read with
:func:`agentc.files.read_private` (owner only, no symlink, no group or other bits). A file that
cannot be parsed is moved aside (``state.json.damaged-<ms>``, named on standard error) and a fresh
state starts, so a damaged file never silences paging.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentc.core.errors import ConfigError
from agentc.files import UnsafeFile, read_private, write_atomic

MAX_STATE_BYTES = 4 * 1024 * 1024
VERSION = 1


@dataclass
class Failing:
    """A check that fails: since when, what it said, when it was last paged."""

    since_ms: int
    text: str
    paged_ms: int


@dataclass
class Page:
    """One page: a failure (priority high), a repeat, or a recovery note (priority low);
    ``to`` lists the destinations that have not accepted it yet."""

    id: str
    key: str
    kind: str  # "failing" | "recovered"
    title: str
    message: str
    priority: int  # ntfy's 1 (min) to 5 (max)
    tags: list[str]
    at_ms: int
    to: list[str]


@dataclass
class State:
    first_run_ms: int
    failing: dict[str, Failing] = field(default_factory=dict)
    outbox: list[Page] = field(default_factory=list)
    reported: list[str] = field(default_factory=list)  # canary rows the coordinator accepted
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        data = {"version": VERSION, **asdict(self)}
        return json.dumps(data, indent=1, sort_keys=True).encode() + b"\n"


def _parse(raw: bytes) -> State:
    data = json.loads(raw)
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError("not a state file of this version")
    return State(
        first_run_ms=int(data["first_run_ms"]),
        failing={k: Failing(**v) for k, v in dict(data.get("failing", {})).items()},
        outbox=[Page(**p) for p in list(data.get("outbox", []))],
        reported=[str(r) for r in data.get("reported", [])],
        extra=dict(data.get("extra", {})),
    )


def load(path: Path, now_ms: int) -> State:
    """The state at ``path``; a fresh one (first run now) when there is none."""
    try:
        raw = read_private(path, max_bytes=MAX_STATE_BYTES)
    except UnsafeFile as exc:
        if exc.missing:
            return State(first_run_ms=now_ms)
        raise ConfigError(f"state file {exc.path}: {exc.reason}") from None
    try:
        return _parse(raw)
    except (ValueError, TypeError, KeyError) as exc:
        aside = path.with_name(f"{path.name}.damaged-{now_ms}")
        path.rename(aside)
        print(
            f"agentc-attention: {path} could not be read ({type(exc).__name__}); moved to "
            f"{aside}, starting afresh",
            file=sys.stderr,
        )
        return State(first_run_ms=now_ms)


def save(path: Path, state: State) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(path, state.to_json(), mode=0o600)
