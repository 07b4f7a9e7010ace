"""Session state and the mutation journal: `<state>/sessions/<name>.json` plus `<name>.lock`.

The file holds the agent session (id and proof; no proof when the credential carries its session,
`bound`: a launch's attempt credential), the one pending mutation (method, path, body,
Idempotency-Key and, for `connect`, the client-made session id and proof: written and fsynced
*before* the request leaves), and what the last answers
taught us (the held attempt, the held review, prepared worktrees). Every write replaces the file
atomically (temporary file, fsync, rename, fsync of the directory). The directory is 0700 and
the files 0600. A command holds the lock for its whole read-modify-write, so two commands of
one session never interleave.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentc.client.errors import LocalConflict, TransportFailure
from agentc.core.errors import ConfigError
from agentc.files import locks, write_atomic

LOCK_WAIT_SECONDS = 60.0
VERSION = 1


@dataclass
class Pending:
    """A mutation that was journaled and has no definitive answer yet."""

    op: str
    method: str
    path: str
    body: Any
    key: str
    with_session: bool
    created_at: float
    # Opening a session: the client-made proof, sent alone (never shown by `status`).
    session_proof: str | None = None

    def describe(self) -> str:
        return f"{self.method} {self.path} (Idempotency-Key {self.key})"


@dataclass
class State:
    origin: str
    session_id: str | None = None
    proof: str | None = None
    agent: str | None = None
    harness: str | None = None
    workstation_id: str | None = None
    pending: Pending | None = None
    attempt: dict[str, Any] | None = None
    review: dict[str, Any] | None = None
    worktrees: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The credential carries the session (an attempt credential in a launch): requests send no
    # session headers, and the coordinator acts in the attempt's session.
    bound: bool = False

    def session(self) -> tuple[str, str] | None:
        """The session id and proof requests send (None: none to send)."""
        if self.session_id and self.proof:
            return (self.session_id, self.proof)
        return None

    def has_session(self) -> bool:
        """Whether requests act in an agent session: one with its proof, or the credential's."""
        return self.session() is not None or (self.bound and bool(self.session_id))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> State:
        data = dict(data)
        data.pop("version", None)
        pending = data.pop("pending", None)
        state = cls(**data)
        state.pending = Pending(**pending) if pending else None
        return state


class Store:
    """One session's state file, its lock, and atomic durable writes."""

    def __init__(self, state_dir: Path, name: str) -> None:
        self.dir = state_dir / "sessions"
        self.path = self.dir / f"{name}.json"
        self.lock_path = self.dir / f"{name}.lock"
        self.name = name

    def _ensure_dir(self) -> None:
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the state directory {self.dir}: {exc}") from exc

    @contextlib.contextmanager
    def locked(self, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
        """Exclusive use of this session's state (one command at a time)."""
        self._ensure_dir()
        deadline = time.monotonic() + wait
        while (fd := locks.hold(self.lock_path)) is None:
            if time.monotonic() > deadline:
                raise TransportFailure(
                    f"session {self.name!r} is busy: another command holds {self.lock_path}; "
                    "try again"
                )
            time.sleep(0.05)
        try:
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def load(self, origin: str) -> State:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return State(origin=origin)
        except OSError as exc:
            raise ConfigError(f"cannot read the session state {self.path}: {exc}") from exc
        try:
            state = State.from_json(json.loads(raw))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"the session state {self.path} is damaged: {exc}") from exc
        if state.origin != origin:
            raise LocalConflict(
                f"session {self.name!r} belongs to {state.origin}, not {origin}; "
                "use another --session name"
            )
        return state

    def save(self, state: State) -> None:
        self._ensure_dir()
        data = json.dumps(state.to_json(), indent=2, sort_keys=True).encode()
        write_atomic(self.path, data, mode=0o600)
