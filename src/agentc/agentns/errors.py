"""The launcher's own errors (agentns stands alone: it shares nothing with ``agentc.core``).

::

    AgentnsError                 any launcher failure before exec; exit 2
    +-- UsageError               bad command line (empty intent, missing command)
    +-- BudgetError              a --budget spec that does not parse
    +-- KernelError              the agent-namespace path failed after it was chosen
    |   +-- PermissionDenied     PR_SET_AGENT_NS returned EPERM (needs CAP_SYS_ADMIN)
    |   +-- SessionIdError       the id read back from procfs is malformed or all zeros
    +-- RecordError              the --record file could not be written

Every class maps to exit status 2; exec failures (126/127) are not exceptions of this tree
because they happen at the very end, in ``cli.main``.
"""

from __future__ import annotations


class AgentnsError(Exception):
    """A launcher failure before exec. ``str(err)`` is the user-facing message."""

    exit_code: int = 2


class UsageError(AgentnsError):
    """The command line is well formed for the parser but semantically wrong."""


class BudgetError(AgentnsError):
    """A ``--budget`` spec is empty, has an unknown key, or a value that does not parse."""


class KernelError(AgentnsError):
    """The agent-namespace prctl path was taken and failed in a way that must not be hidden."""


class PermissionDenied(KernelError):
    """``PR_SET_AGENT_NS`` returned EPERM: the caller lacks CAP_SYS_ADMIN."""


class SessionIdError(KernelError):
    """The session id read back after a successful create is not 32 non-zero lowercase hex."""


class RecordError(AgentnsError):
    """The ``--record`` file could not be written, so the launch would be untraceable."""
