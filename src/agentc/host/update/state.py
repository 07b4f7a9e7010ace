"""The updater's memory and its voice.

``<state>/update-state.json`` (root 0600): the live core release and the one before it (what
``--rollback core`` returns to), the harness step's saved files (what ``--rollback harness``
restores), and the releases rejected (never retried until a newer one appears, or ``--retry``).
``<state>/update.jsonl``: one line per run (its outcome). Pages go to the destinations of
``<etc>/attention.toml`` (:mod:`agentc.attention.paging`, the one way agentc pages); without
that file a page is printed on standard error only, and says so.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentc.attention.state import Page
from agentc.core.errors import AgentcError, ConfigError
from agentc.files import JsonLines, UnsafeFile, read_private, write_atomic
from agentc.host.settings import HostSettings

MAX_STATE = 1024 * 1024


@dataclass
class UpdateState:
    core: dict[str, Any] = field(default_factory=dict)  # version, previous
    harness: dict[str, Any] = field(default_factory=dict)  # saved (folder), release
    rejected: list[str] = field(default_factory=list)
    harness_rejected: list[str] = field(default_factory=list)


def state_path(settings: HostSettings) -> Path:
    return settings.state_dir / "update-state.json"


def load(settings: HostSettings) -> UpdateState:
    path = state_path(settings)
    try:
        raw = read_private(path, max_bytes=MAX_STATE, owner_uid=0)
    except UnsafeFile as exc:
        if exc.missing:
            return UpdateState()
        raise ConfigError(f"{path}: {exc.reason}") from None
    try:
        data = json.loads(raw)
        return UpdateState(
            dict(data.get("core") or {}), dict(data.get("harness") or {}),
            [str(v) for v in data.get("rejected") or []],
            [str(v) for v in data.get("harness_rejected") or []],
        )  # fmt: skip
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: damaged ({exc}); move it aside") from None


def save(settings: HostSettings, state: UpdateState) -> None:
    data = json.dumps(asdict(state), indent=1, sort_keys=True).encode() + b"\n"
    write_atomic(state_path(settings), data, mode=0o600)


def log(settings: HostSettings, outcome: str, **fields: Any) -> None:
    """One line in ``<state>/update.jsonl`` (the results file, kept by --uninstall)."""
    out = JsonLines.open(settings.state_dir / "update.jsonl")
    try:
        out.write({"at": int(time.time()), "outcome": outcome, **fields})
    finally:
        out.close()


def page(settings: HostSettings, title: str, message: str) -> list[str]:
    """Send one high-priority page; the problems, if it did not reach every destination."""
    print(f"agentc-host: page: {title}: {message}", file=sys.stderr)
    config_path = settings.etc_dir / "attention.toml"
    if not config_path.exists():
        return [f"not paged: no {config_path} names a page destination"]
    from agentc.attention import paging
    from agentc.attention.config import AttentionConfig

    try:
        config = AttentionConfig.load(config_path, what="attention configuration")
        send = paging.senders(config)
    except AgentcError as exc:
        return [f"not paged: {exc}"]
    at = time.time_ns() // 1_000_000
    item = Page(str(uuid.uuid4()), "update", "failing", title, message, 5,
                ["rotating_light"], at, sorted(send))  # fmt: skip
    return paging.deliver([item], send)
