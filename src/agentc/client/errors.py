"""The client's errors and the one table that turns any of them into an exit code.

    AgentcError (agentc.core.errors)
    ├── CoordinatorError        the service refused: rebuilt from its error envelope
    ├── ConfigError             bad input: a file, flag or value is wrong          exit 2
    │   └── SetupRequired       credentials, binding or session missing or unsafe  exit 3
    ├── TransportFailure        no definitive answer (network, redirect, 429, 5xx) exit 7
    ├── MutationPending         an earlier mutation is unresolved: run `retry`     exit 7
    └── LocalConflict           local state refuses (a git branch exists, ...)     exit 5

Exit codes: 0 ok, 2 invalid input, 3 authentication or setup, 4 denied, 5 conflict,
6 unsatisfied requirements, 7 transport or temporary failure.
"""

from __future__ import annotations

from agentc.core.errors import AgentcError, ConfigError, CoordinatorError

OK = 0
INVALID_INPUT = 2
AUTHENTICATION = 3
DENIED = 4
CONFLICT = 5
UNSATISFIED = 6
TRANSPORT = 7

EXIT_CODES: dict[int, str] = {
    OK: "success",
    INVALID_INPUT: "invalid input (bad flag, file, JSON, id or request body)",
    AUTHENTICATION: "authentication or setup required (token, credentials file, session)",
    DENIED: "denied by the coordinator (403)",
    CONFLICT: "state or ownership conflict (409; on `release`: already released)",
    UNSATISFIED: "unsatisfied requirements (evidence, review, preconditions)",
    TRANSPORT: "transport or temporary failure; the mutation stays pending: run `retry`",
}

# Refusals whose fix is to satisfy a requirement, not to resolve a race.
UNSATISFIED_CODES = frozenset(
    {
        "evidence_mismatch",
        "amendment_requires_review",
        "reviews_pending",
        "instructions_required",
        "preconditions_unsatisfied",
        "required_checks_missing",
    }
)
SETUP_CODES = frozenset({"authentication_required", "session_required", "session_closed"})


class SetupRequired(ConfigError):
    """Credentials, the repository binding or the agent session are missing or unsafe."""


class TransportFailure(AgentcError):
    """The coordinator gave no definitive answer: the request may or may not have happened."""


class MutationPending(AgentcError):
    """A journaled mutation has no definitive answer yet; only `retry` may proceed."""


class LocalConflict(AgentcError):
    """Local state (a git branch, a worktree, the session file) refuses the operation."""


def exit_code(exc: BaseException) -> int:
    """The documented exit code for an error."""
    if isinstance(exc, CoordinatorError):
        return status_exit_code(exc.status, exc.code)
    if isinstance(exc, SetupRequired):
        return AUTHENTICATION
    if isinstance(exc, ConfigError):
        return INVALID_INPUT
    if isinstance(exc, TransportFailure | MutationPending):
        return TRANSPORT
    if isinstance(exc, LocalConflict):
        return CONFLICT
    return 1


def status_exit_code(status: int, code: str) -> int:
    if code in SETUP_CODES or status == 401:
        return AUTHENTICATION
    if code in UNSATISFIED_CODES:
        return UNSATISFIED
    if status == 429 or status >= 500:
        return TRANSPORT
    if status == 403:
        return DENIED
    if status == 409:
        return CONFLICT
    return INVALID_INPUT
