"""Publishing a candidate or a WIP revision through the candidate push helper.

Inside an implementer launch the agent holds no push credential: the supervisor starts
``agentc-push`` beside the launch and exports its socket as
``AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET``. ``submissions code`` and ``checkpoint --push-wip``
publish through it; the helper derives the ref, scans the candidate for secrets and never moves
a published ref (docs/push.md).
"""

from __future__ import annotations

import time
from pathlib import Path

from agentc.client.errors import CandidateRefused, TransportFailure

# The supervisor starts the helper once the launch runs: a socket not there yet is waited for.
HELPER_START_SECONDS = 15.0


def publish(socket: Path, op: str, revision: str, checkout: str) -> str:
    """Publish through the candidate push helper (the launch's only way to push); its ref."""
    from agentc.push import protocol

    deadline = time.monotonic() + HELPER_START_SECONDS
    try:
        while True:
            try:
                answer = protocol.publish(socket, op, revision, checkout)
                break
            except protocol.HelperUnavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
    except protocol.Refused as exc:
        raise CandidateRefused(str(exc)) from None
    except protocol.PushError as exc:
        raise TransportFailure(f"the candidate push helper at {socket}: {exc}") from None
    return str(answer["ref"])
