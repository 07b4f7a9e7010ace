"""The mutation journal: every mutation of the agent's workflow goes through `Journal.mutate`.

Under the session lock it refuses to start while an earlier mutation is unresolved, journals the
exact request with a new Idempotency-Key (fsynced), sends it, and only a definitive answer clears
the journal; what the answer teaches (the opened session, the claimed attempt, the claimed
review, the registered checkout) is saved in the same atomic write, by the operation family's
learner (`Journal.learners`). `retry` resends the journaled request byte for byte with its key,
so a lost answer is recovered from the coordinator's receipt instead of being done twice.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx

from agentc.client.config import Settings
from agentc.client.errors import MutationPending, SetupRequired
from agentc.client.state import Pending, State, Store
from agentc.client.transport import Closing, Transport, check_path
from agentc.core.errors import ConfigError, CoordinatorError

# How a mutation uses the agent session: it must have one, sends it when there is one, or never.
SessionUse = Literal["required", "optional", "none"]
# What a definitive success of one operation teaches the session state; returns what to show.
Learner = Callable[[State, Pending, Any], Any]


@dataclass(frozen=True)
class Outcome:
    """A mutation's data, and whether the coordinator replayed a stored answer."""

    data: Any
    replayed: bool = False
    request: Pending | None = None


def ends_hold(hold: Literal["attempt", "review"], collection: str, id_key: str) -> Learner:
    """The learner of the requests that end the session's held ``hold`` (its record's id under
    ``id_key``): a definitive answer to a request on that record (a path under
    ``/{collection}/{id}/``) means it is held no more."""

    def learn(st: State, pending: Pending, data: Any) -> Any:
        held: dict[str, Any] | None = getattr(st, hold)
        if held is not None and f"/{collection}/{held[id_key]}/" in pending.path:
            setattr(st, hold, None)
        return data

    return learn


def no_session() -> SetupRequired:
    return SetupRequired("no agent session: run `agent-coordinator connect` first")


def unresolved(pending: Pending) -> MutationPending:
    return MutationPending(
        f"an earlier mutation is unresolved: {pending.describe()}; run "
        "`agent-coordinator retry` to resend it with the same key before anything else"
    )


class Journal(Closing):
    """One agent session of one coordinator, as seen from this machine: the plumbing every
    operation family (`agentc.client.ops.Agent`) builds on."""

    learners: ClassVar[Mapping[str, Learner]] = {}

    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self.store = Store(settings.state_dir, settings.session_name)
        self.http = Transport(settings.origin, settings.token, transport)
        # An Idempotency-Key chosen by the caller (the MCP adapter) for the next mutation.
        self.key: str | None = None

    def close(self) -> None:
        self.http.close()

    def project(self, suffix: str = "") -> str:
        return f"/api/v1/projects/{self.settings.project_id}{suffix}"

    def state(self) -> State:
        return self.store.load(self.settings.origin)

    def get(self, path: str, *, with_session: bool = True) -> Any:
        self.settings.require_token()
        session = self.state().session() if with_session else None
        return self.http.send("GET", path, session=session).data

    def mutate(
        self,
        op: str,
        method: str,
        path: str,
        body: Any,
        *,
        session: SessionUse = "required",
        key: str | None = None,
        session_proof: str | None = None,
    ) -> Outcome:
        """Journal, send and resolve one mutation. `session_proof`: a client-made proof sent
        alone (opening a session)."""
        self.settings.require_token()
        check_path(path)
        key = key or self.key
        with self.store.locked():
            st = self.state()
            if st.pending is not None:
                if key is None or key != st.pending.key:
                    raise unresolved(st.pending)
                if (st.pending.method, st.pending.path, st.pending.body) != (method, path, body):
                    raise ConfigError(
                        f"Idempotency-Key {key} was journaled for another request "
                        f"({st.pending.describe()}); use a new key for a new request"
                    )
                return self._deliver(st)
            creds = st.session()
            if session == "required" and not st.has_session():
                raise no_session()
            st.pending = Pending(
                op=op,
                method=method,
                path=path,
                body=body,
                key=key or str(uuid.uuid4()),
                with_session=creds is not None and session != "none",
                created_at=time.time(),
                session_proof=session_proof,
            )
            self.store.save(st)
            return self._deliver(st)

    def _deliver(self, st: State) -> Outcome:
        pending = st.pending
        assert pending is not None
        creds = st.session() if pending.with_session else None
        if pending.with_session and creds is None:
            raise SetupRequired("the journaled request needs the session, which is gone")
        try:
            answer = self.http.send(
                pending.method,
                pending.path,
                pending.body,
                key=pending.key,
                session=creds,
                lone_proof=pending.session_proof,
            )
        except CoordinatorError as refusal:  # definitive: the request did not happen
            st.pending = None
            self.store.save(st)
            raise refusal
        # TransportFailure propagates with the journal still pending.
        st.pending = None
        try:
            learn = self.learners.get(pending.op)
            data = answer.data if learn is None else learn(st, pending, answer.data)
        finally:
            self.store.save(st)
        return Outcome(data, answer.replayed, pending)

    def retry(self) -> Outcome | None:
        """Resend the journaled mutation exactly; None when nothing is pending."""
        self.settings.require_token()
        with self.store.locked():
            st = self.state()
            if st.pending is None:
                return None
            return self._deliver(st)

    def status(self) -> dict[str, Any]:
        st = self.state()
        pending = st.pending
        return {
            "origin": self.settings.origin,
            "project_id": self.settings.project_id,
            "session_name": self.store.name,
            "state_file": str(self.store.path),
            "session_id": st.session_id,
            "agent": st.agent,
            "harness": st.harness,
            "workstation_id": st.workstation_id,
            "token_source": self.settings.token_source if self.settings.token else None,
            "pending": None
            if pending is None
            else {
                "op": pending.op,
                "method": pending.method,
                "path": pending.path,
                "idempotency_key": pending.key,
            },
            "attempt": st.attempt,
            "review": st.review,
            "worktrees": st.worktrees,
        }
