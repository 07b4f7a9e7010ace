"""Publishing a candidate or a WIP revision through the candidate push helper.

Inside an implementer launch the agent holds no push credential: the supervisor starts
``agentc-push`` beside the launch and exports its socket as
``AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET``. ``submissions code`` and ``checkpoint --push-wip``
publish through it; the helper derives the ref, scans the candidate for secrets and never moves
a published ref (docs/push.md).
"""

from __future__ import annotations

from pathlib import Path

from agentc.client.errors import CandidateRefused, TransportFailure


def publish(socket: Path, op: str, revision: str, checkout: str) -> str:
    """Publish through the candidate push helper (the launch's only way to push); its ref."""
    from agentc.push import protocol

    try:
        answer = protocol.publish(socket, op, revision, checkout)
    except protocol.Refused as exc:
        raise CandidateRefused(str(exc)) from None
    except protocol.PushError as exc:
        raise TransportFailure(f"the candidate push helper at {socket}: {exc}") from None
    return str(answer["ref"])
