"""agentns: the ``agentns-claude`` launcher and what a supervisor needs to wrap launches in it.

Self-contained on purpose (it imports nothing else from ``agentc``), so the package can be
copied on its own. The public surface for callers:

* :func:`establish`: put the calling process into an agent session (the launcher's ladder, in
  process: no exec) and get its :class:`SessionRecord` (id, mode, intent);
* :func:`wrapper_argv` / :func:`headless_intent`: the argv that wraps a harness launch;
* :func:`read_record` / :class:`SessionRecord`: the ``--record`` file (session id and mode);
* :func:`session_from_env` / :func:`in_kernel_session`: the session a process inherited, and
  whether a ``prctl`` session's claim holds for this process;
* the names of the variables the wrapped command sees (``ENV_*``, :data:`CHILD_ENV_VARS`,
  :func:`session_env`) and the ``AGENTNS_MODE`` values (:data:`MODES`);
* :func:`parse_budget` / :class:`Budget` for validating a budget spec before launching;
* the error tree rooted at :class:`AgentnsError`.
"""

from agentc.agentns.budget import BUDGET_KEYS, Budget, parse_budget
from agentc.agentns.errors import (
    AgentnsError,
    BudgetError,
    KernelError,
    PermissionDenied,
    RecordError,
    SessionIdError,
    UsageError,
)
from agentc.agentns.kernel import in_kernel_session
from agentc.agentns.launch import (
    CHILD_ENV_VARS,
    ENV_BUDGET_ENFORCED,
    ENV_BUDGET_UNENFORCED,
    ENV_INTENT,
    ENV_MODE,
    ENV_SESSION_ID,
    LAUNCHER,
    MODE_MOCK,
    MODE_NO_UNSHARE,
    MODE_PRCTL,
    MODE_SYNTH_FALLBACK,
    MODES,
    RECORD_FILENAME,
    SessionRecord,
    headless_intent,
    read_record,
    session_env,
    session_from_env,
    wrapper_argv,
)
from agentc.agentns.resolve import establish

__all__ = [
    "BUDGET_KEYS",
    "CHILD_ENV_VARS",
    "ENV_BUDGET_ENFORCED",
    "ENV_BUDGET_UNENFORCED",
    "ENV_INTENT",
    "ENV_MODE",
    "ENV_SESSION_ID",
    "LAUNCHER",
    "MODES",
    "MODE_MOCK",
    "MODE_NO_UNSHARE",
    "MODE_PRCTL",
    "MODE_SYNTH_FALLBACK",
    "RECORD_FILENAME",
    "AgentnsError",
    "Budget",
    "BudgetError",
    "KernelError",
    "PermissionDenied",
    "RecordError",
    "SessionIdError",
    "SessionRecord",
    "UsageError",
    "establish",
    "headless_intent",
    "in_kernel_session",
    "parse_budget",
    "read_record",
    "session_env",
    "session_from_env",
    "wrapper_argv",
]
