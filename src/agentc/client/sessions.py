"""Opening and showing the agent session.

`connect` makes the session id and its proof here (the proof is 32 random bytes as hex, sent
alone in `X-Coordinator-Session-Proof`) and journals both before the request leaves, so even a
lost answer to `connect` loses nothing: `retry` replays it and the same session is stored.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from agentc.client.errors import SetupRequired
from agentc.client.journal import Journal, Learner, Outcome, no_session
from agentc.client.state import Pending, State

DEFAULT_HARNESS = "agent-coordinator-cli"


class Sessions(Journal):
    def connect(
        self,
        harness: str = DEFAULT_HARNESS,
        workstation: str | None = None,
        capabilities: tuple[str, ...] = (),
        new: bool = False,
    ) -> Outcome:
        st = self.state()
        if st.session_id and not new:
            view = self.get(f"/api/v1/sessions/{st.session_id}")
            if view.get("closed_at"):
                raise SetupRequired(
                    f"the stored session {st.session_id} is closed: run `connect --new`"
                )
            return Outcome({**view, "agent": st.agent, "reused": True})
        # The id and the proof are made here and journaled before the request leaves. A caller
        # resending its own Idempotency-Key (the MCP adapter) gets the journaled id and proof.
        session_id, proof = str(uuid.uuid4()), secrets.token_hex(32)
        pending = st.pending
        if (
            pending is not None
            and pending.op == "connect"
            and self.key == pending.key
            and isinstance(pending.body, dict)
        ):
            session_id = str(pending.body.get("session_id", session_id))
            proof = pending.session_proof or proof
        body: dict[str, Any] = {
            "session_id": session_id,
            "harness": harness,
            "capabilities": list(capabilities),
        }
        if workstation:
            body["workstation_id"] = workstation
        return self.mutate(
            "connect", "POST", "/api/v1/sessions", body, session="none", session_proof=proof
        )

    def session_show(self) -> dict[str, Any]:
        """The coordinator's view of this session, with the attempts it holds."""
        st = self.state()
        if not st.has_session():
            raise no_session()
        view = self.get(f"/api/v1/sessions/{st.session_id}")
        return {**view, "agent": st.agent, "local_attempt": st.attempt}


def _opened(st: State, pending: Pending, data: Any) -> Any:
    """Store the session the coordinator opened with the client-made id and proof."""
    wanted = pending.body.get("session_id") if isinstance(pending.body, dict) else None
    if (
        not isinstance(data, dict)
        or pending.session_proof is None
        or data.get("session_id") != wanted
        or data.get("proof_source", "client") != "client"
    ):
        raise SetupRequired(
            "the coordinator did not open the session with the client-made id and proof "
            "(it may be too old for this client); the session was not stored"
        )
    st.session_id, st.proof = wanted, pending.session_proof
    st.agent, st.harness = data.get("agent"), data.get("harness")
    st.workstation_id = pending.body.get("workstation_id")
    st.attempt = st.review = None
    return {k: v for k, v in data.items() if k != "proof"}


LEARNERS: dict[str, Learner] = {"connect": _opened}
