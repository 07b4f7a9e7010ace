"""Every launch runs inside an agent session: ``agentns-claude --intent headless:<role>``.

The session id must exist before anything that carries it (the run markers, the gateway
sentinel, the harness environment), so the launch process itself runs under the launcher:
when ``agentc-supervisor launch`` (or ``launch-root``) starts without a session for its role,
:func:`ensure` execs ``agentns-claude --intent headless:<role> [--no-unshare] -- <its own
argv>``. The launcher resolves the id (a real agent namespace on a wintermute kernel, else a
synthesized id) and execs the supervisor again in place: the same pid, now with
``AGENTNS_SESSION_ID``, ``AGENTNS_INTENT`` and ``AGENTNS_MODE`` in its environment, which
:func:`current` reads back.

A process that already runs under ``headless:<role>`` (a caller that wrapped the launch
itself, or the role account's ``launch`` started by ``launch-root``) is not re-exec'd. A
``prctl`` claim is checked against ``/proc/self/agent_session``: an inherited variable naming
a namespace the process is not in is not a session. :data:`MARKER` (the pid that exec'd) stops
a loop when the launcher hands back no usable session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentc.agentns import (
    ENV_INTENT,
    ENV_MODE,
    ENV_SESSION_ID,
    MODE_PRCTL,
    headless_intent,
    session_from_env,
)
from agentc.core.errors import SupervisorError

if TYPE_CHECKING:
    from agentc.supervisor.config import SupervisorConfig

MARKER = "AGENTC_AGENTNS_EXEC"
# agentns-claude run by this supervisor's own interpreter: always the same agentc version.
BOOT = "import sys; from agentc.agentns.cli import main; sys.exit(main())"
SESSION_PATH = "/proc/self/agent_session"
ENV_SESSION_PATH = "AGENTNS_SESSION_PATH"  # agentns-claude's seam for the procfs entry


@dataclass(frozen=True)
class AgentSession:
    """The launch's agent session, as agentns-claude resolved it."""

    session_id: str
    mode: str
    intent: str

    def env(self) -> dict[str, str]:
        """The variables passed through to the harness (and to launch-root's child)."""
        return {ENV_SESSION_ID: self.session_id, ENV_INTENT: self.intent, ENV_MODE: self.mode}

    def record(self) -> dict[str, str]:
        """The fields every host-side record of the launch carries."""
        return {
            "agentns_session_id": self.session_id,
            "agentns_mode": self.mode,
            "agentns_intent": self.intent,
        }


def _in_namespace(session_id: str, environ: Mapping[str, str]) -> bool:
    path = environ.get(ENV_SESSION_PATH) or SESSION_PATH
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip() == session_id
    except OSError:
        return False


def current(role: str, environ: Mapping[str, str] | None = None) -> AgentSession | None:
    """The session this process runs in for ``role``, or None (none, or another intent)."""
    env = os.environ if environ is None else environ
    found = session_from_env(env)
    intent = headless_intent(role)
    if found is None or env.get(ENV_INTENT) != intent:
        return None
    session_id, mode = found
    if mode == MODE_PRCTL and not _in_namespace(session_id, env):
        return None
    return AgentSession(session_id, mode, intent)


def launcher(config: SupervisorConfig) -> list[str]:
    """The argv prefix that runs agentns-claude (``agentns_program``, else our interpreter)."""
    if config.agentns_program:
        return list(config.agentns_program)
    if not sys.executable:
        raise SupervisorError("cannot find the Python interpreter to run agentns-claude")
    return [sys.executable, "-P", "-c", BOOT]


def own_argv(args: Sequence[str]) -> list[str]:
    """This process's command line, to run again under the launcher."""
    orig = list(sys.orig_argv)
    tail = orig[len(orig) - len(args) :] if args else []
    if not sys.executable or len(orig) <= len(args) or tail != list(args):
        raise SupervisorError(
            "cannot run this launch under agentns-claude: it was not started as its own "
            "agentc-supervisor process"
        )
    return [sys.executable, *orig[1:]]


def wrapped_argv(config: SupervisorConfig, role: str, args: Sequence[str]) -> list[str]:
    """``<launcher> --intent headless:<role> [--no-unshare] -- <own argv>``."""
    argv = [*launcher(config), "--intent", headless_intent(role)]
    if config.agentns_no_unshare:
        argv.append("--no-unshare")
    return [*argv, "--", *own_argv(args)]


def ensure(config: SupervisorConfig, role: str, args: Sequence[str]) -> AgentSession:
    """This launch's session; if there is none yet, exec under agentns-claude (no return)."""
    session = current(role)
    if session is not None:
        os.environ.pop(MARKER, None)
        return session
    pid = str(os.getpid())
    if os.environ.get(MARKER) == pid:
        raise SupervisorError(
            f"agentns-claude ran but this launch has no agent session for {headless_intent(role)}"
        )
    argv = wrapped_argv(config, role, args)
    os.environ[MARKER] = pid
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(argv[0], argv)  # noqa: S606 - in place: the launch keeps its pid
    except OSError as exc:
        os.environ.pop(MARKER, None)
        raise SupervisorError(f"cannot run agentns-claude ({argv[0]}): {exc.strerror}") from None
