"""Every launch runs inside an agent session with the intent ``headless:<role>``.

The session id must exist before anything that carries it (the run markers, the gateway
sentinel, the harness environment), so the launch establishes it first, in its own process:
:func:`ensure` calls :func:`agentc.agentns.establish`, the ladder ``agentns-claude`` runs (a
real agent namespace via ``prctl`` on a wintermute kernel, applied to this process and so
inherited by the sandbox and the harness; else a synthesized id), with no exec and no second
interpreter. It then sets ``AGENTNS_SESSION_ID``, ``AGENTNS_INTENT`` and ``AGENTNS_MODE`` in
this process's environment, as the launcher would have for its command.

A process that already runs in a session for ``headless:<role>`` (a caller that wrapped the
launch in ``agentns-claude``, or the role account's ``launch`` started by ``launch-root``,
which established it as root) keeps it and establishes none. A ``prctl`` claim is checked
against ``/proc/self/agent_session``: an inherited variable naming a namespace the process is
not in is not a session.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentc.agentns import (
    ENV_BUDGET_ENFORCED,
    ENV_BUDGET_UNENFORCED,
    ENV_INTENT,
    MODE_PRCTL,
    AgentnsError,
    establish,
    headless_intent,
    in_kernel_session,
    session_env,
    session_from_env,
)
from agentc.core.errors import SupervisorError

if TYPE_CHECKING:
    from agentc.supervisor.config import SupervisorConfig


@dataclass(frozen=True)
class AgentSession:
    """The launch's agent session (established here, or inherited with the right intent)."""

    session_id: str
    mode: str
    intent: str

    def env(self) -> dict[str, str]:
        """The variables passed through to the harness (and to launch-root's child)."""
        return session_env(self.session_id, self.intent, self.mode)

    def record(self) -> dict[str, str]:
        """The fields every host-side record of the launch carries."""
        return {
            "agentns_session_id": self.session_id,
            "agentns_mode": self.mode,
            "agentns_intent": self.intent,
        }


def current(role: str, environ: Mapping[str, str] | None = None) -> AgentSession | None:
    """The session this process runs in for ``role``, or None (none, or another intent)."""
    env = os.environ if environ is None else environ
    found = session_from_env(env)
    intent = headless_intent(role)
    if found is None or env.get(ENV_INTENT) != intent:
        return None
    session_id, mode = found
    if mode == MODE_PRCTL and not in_kernel_session(session_id, env):
        return None
    return AgentSession(session_id, mode, intent)


def ensure(config: SupervisorConfig, role: str) -> AgentSession:
    """This launch's session: the inherited one for ``role``, else one established now.

    Establishing happens in this process (``agentns_no_unshare`` passes ``no_unshare``); an
    agentns refusal (EPERM without CAP_SYS_ADMIN, a bad kernel read-back) is a
    :class:`SupervisorError` naming the intent, raised before anything is written.
    """
    session = current(role)
    if session is None:
        intent = headless_intent(role)
        try:
            made = establish(intent, no_unshare=config.agentns_no_unshare)
        except AgentnsError as exc:
            raise SupervisorError(f"agent session {intent}: {exc}") from None
        session = AgentSession(made.session_id, made.mode, made.intent)
        # As agentns-claude would for its command: no budget claim from an outer launch.
        os.environ.pop(ENV_BUDGET_ENFORCED, None)
        os.environ.pop(ENV_BUDGET_UNENFORCED, None)
    os.environ.update(session.env())
    return session
