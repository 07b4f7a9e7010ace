"""Per-launch sentinel credentials: issued, checked, revoked and fenced on the host side.

A sentinel is a random token the harness presents as its API key. It is bound to one launch
(launch id, attempt, generation, role, task) and one upstream. The registry lives in the gateway
process; the supervisor reaches it over the control socket (control.py), which a launch cannot
reach. Tokens are stored only as SHA-256 digests.

Fencing: issuing a sentinel for an attempt at generation N supersedes every live sentinel of
that attempt with a lower generation, and of other attempts of the same task. A superseded or
revoked sentinel is refused with its reason; the registry never forgets a digest it issued,
so a late request gets "revoked" rather than "unknown".
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Literal

from agentc.core import model_policy, roles
from agentc.core.model_policy import ModelPolicy
from agentc.gateway.errors import GatewayError, SentinelRefused

PREFIX = "agc-sentinel-"
State = Literal["live", "revoked", "superseded"]


@dataclass(frozen=True)
class Grant:
    """What a sentinel allows: one launch's calls to one upstream, metered to the launch.

    ``role_slug`` is the launch's role by its short name (``impl``, ``rev``), as the ledger and
    the logs record it. On the control socket a grant travels as :meth:`message` (the launch
    id under its wire name ``session``) and is read back with :meth:`from_message`.
    """

    launch_id: str
    attempt: str
    generation: int
    upstream: str
    role_slug: str = roles.role_slug("implementer")
    task: str | None = None
    project: str | None = None
    canary: bool = False  # a dedicated canary project's launch: its ledger rows carry the mark
    launch_usd: float | None = None  # per-launch cap override (else the configured one)
    agentns_session_id: str | None = None  # the launch's agent session (agentns)
    agentns_mode: str | None = None
    policy: ModelPolicy = ModelPolicy()  # the task's effective model policy (core.model_policy)

    def message(self) -> dict[str, Any]:
        """The grant's fields of an ``issue`` request (absent optional fields left out)."""
        message: dict[str, Any] = {
            "session": self.launch_id,
            "attempt": self.attempt,
            "generation": self.generation,
            "upstream": self.upstream,
            "role": self.role_slug,
        }
        optional = {
            "task": self.task,
            "project": self.project,
            "launch_usd": self.launch_usd,
            "agentns_session_id": self.agentns_session_id,
            "agentns_mode": self.agentns_mode,
        }
        message.update((key, value) for key, value in optional.items() if value is not None)
        if self.canary:
            message["canary"] = True
        if not self.policy.empty:
            message["policy"] = model_policy.to_wire(self.policy)
        return message

    @classmethod
    def from_message(cls, request: dict[str, Any]) -> Grant:
        """The grant an ``issue`` request asks for; KeyError, TypeError or ValueError if bad."""
        launch_usd = request.get("launch_usd")
        try:
            policy = model_policy.from_wire(request.get("policy"))
        except ValueError as exc:
            raise GatewayError(f"policy: {exc}") from None
        return cls(
            launch_id=str(request["session"]),
            attempt=str(request["attempt"]),
            generation=int(request["generation"]),
            upstream=str(request["upstream"]),
            role_slug=str(request.get("role") or roles.role_slug("implementer")),
            task=_optional(request, "task"),
            project=_optional(request, "project"),
            canary=request.get("canary") is True,
            launch_usd=float(launch_usd) if launch_usd is not None else None,
            agentns_session_id=_optional(request, "agentns_session_id"),
            agentns_mode=_optional(request, "agentns_mode"),
            policy=policy,
        )


def _optional(request: dict[str, Any], key: str) -> str | None:
    value = request.get(key)
    return str(value) if value else None


@dataclass
class _Entry:
    grant: Grant
    state: State = "live"
    reason: str = ""
    cap: str | None = None  # the cap that refused a call of this launch, if any
    stop: dict[str, str] | None = None  # the first refusal that ended its model access
    calls: int = 0


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SentinelRegistry:
    def __init__(self) -> None:
        self._by_digest: dict[str, _Entry] = {}
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()

    def issue(self, grant: Grant) -> str:
        if not grant.launch_id or not grant.attempt or not grant.upstream:
            raise GatewayError("a sentinel needs a launch id, an attempt and an upstream")
        token = PREFIX + secrets.token_urlsafe(32)
        with self._lock:
            seen = self._generation.get(grant.attempt)
            if seen is not None and grant.generation < seen:
                raise GatewayError(
                    f"attempt {grant.attempt}: generation {grant.generation} is older than {seen}"
                )
            self._generation[grant.attempt] = grant.generation
            for entry in self._by_digest.values():
                if entry.state != "live":
                    continue
                old = entry.grant
                same_attempt = old.attempt == grant.attempt and old.generation < grant.generation
                same_task = grant.task is not None and old.task == grant.task
                if same_attempt or (same_task and old.attempt != grant.attempt):
                    entry.state = "superseded"
                    entry.reason = f"superseded by attempt {grant.attempt} gen {grant.generation}"
            self._by_digest[_digest(token)] = _Entry(grant)
        return token

    def check(self, token: str | None) -> Grant:
        if not token:
            raise SentinelRefused("no credential presented")
        with self._lock:
            entry = self._by_digest.get(_digest(token))
            if entry is None:
                raise SentinelRefused("unknown credential")
            if entry.state != "live":
                raise SentinelRefused(f"{entry.state}: {entry.reason}")
            entry.calls += 1
            return entry.grant

    def revoke(self, launch_id: str, reason: str = "the launch ended") -> int:
        """Revoke every live sentinel of a launch; returns how many."""
        count = 0
        with self._lock:
            for entry in self._by_digest.values():
                if entry.grant.launch_id == launch_id and entry.state == "live":
                    entry.state = "revoked"
                    entry.reason = reason
                    count += 1
        return count

    def note_cap(self, launch_id: str, cap: str, reason: str) -> None:
        with self._lock:
            for entry in self._by_digest.values():
                if entry.grant.launch_id == launch_id and entry.cap is None:
                    entry.cap = cap
        self.note_stop(launch_id, "cap", cap, reason)

    def note_stop(self, launch_id: str, kind: str, name: str, reason: str) -> None:
        """Remember the first refusal that ended the launch's model access (a cap, the model
        policy's turns, a loop breaker): ``kind``, its ``name`` and the reason in words."""
        with self._lock:
            for entry in self._by_digest.values():
                if entry.grant.launch_id == launch_id and entry.stop is None:
                    entry.stop = {"kind": kind, "name": name, "reason": reason}

    def status(self, launch_id: str) -> dict[str, object]:
        """Host-side view of a launch's sentinels (never the tokens)."""
        with self._lock:
            entries = [e for e in self._by_digest.values() if e.grant.launch_id == launch_id]
            return {
                "session": launch_id,
                "sentinels": [
                    {
                        "attempt": e.grant.attempt,
                        "generation": e.grant.generation,
                        "upstream": e.grant.upstream,
                        "state": e.state,
                        "reason": e.reason,
                        "calls": e.calls,
                    }
                    for e in entries
                ],
                "cap": next((e.cap for e in entries if e.cap), None),
                "stop": next((e.stop for e in entries if e.stop), None),
            }
