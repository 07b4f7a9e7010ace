"""How a command-line program of agentc ends with an error: one line, one table of statuses.

Every program (``agent-coordinator``, ``agent-coordinator-server``, ``agentc``,
``agentc-supervisor``, ``agentc-integrator``, ``agentc-push``, ``agentc-attention``) exits
with a status from :data:`EXIT_STATUSES`, the one table docs/cli.md shows, and names an error
with :func:`fail`: ``<program>: <problem>`` on standard error, never a traceback. The agent's
command line adds the refusal's code (``error: <code>: <message>``, :mod:`agentc.client.errors`)
because agents read it; the statuses are the same.
"""

from __future__ import annotations

import sys
from typing import NoReturn

OK = 0
FAILED = 1
INVALID_INPUT = 2
AUTHENTICATION = 3
DENIED = 4
CONFLICT = 5
UNSATISFIED = 6
TRANSPORT = 7

EXIT_STATUSES: dict[int, str] = {
    OK: "success",
    FAILED: "the work ran and failed: a check or canary failed, a launch or the database failed",
    INVALID_INPUT: "invalid input (bad flag, file, setting, JSON, id or request body)",
    AUTHENTICATION: "authentication or setup required (token, credentials file, session)",
    DENIED: "denied by the coordinator (403)",
    CONFLICT: "state or ownership conflict (409; on `release`: already released; another "
    "process holds the lock)",
    UNSATISFIED: "unsatisfied requirements (evidence, review, preconditions; a refused candidate)",
    TRANSPORT: "transport or temporary failure (the coordinator or a page's destination gave no "
    "answer; the agent's mutation stays pending: run `retry`)",
}

# What each program means by the statuses it uses (docs/cli.md shows this table).
PROGRAM_STATUSES: dict[str, dict[int, str]] = {
    "agent-coordinator, agent-coordinator-mcp": {
        INVALID_INPUT: "bad input",
        AUTHENTICATION: "no credentials or session",
        DENIED: "denied",
        CONFLICT: "conflict",
        UNSATISFIED: "unsatisfied, or the push helper refused the candidate",
        TRANSPORT: "no definitive answer (run `retry`)",
    },
    "agent-coordinator-server": {FAILED: "the database failed", INVALID_INPUT: "bad input"},
    "agentc (up, status, ...)": {INVALID_INPUT: "bad input or state directory"},
    "agentc-supervisor": {FAILED: "the launch or command failed (the message says why)"},
    "agentc-supervisor gateway": {INVALID_INPUT: "bad configuration or credential file"},
    "agentc-integrator": {
        FAILED: "the coordinator refused",
        INVALID_INPUT: "bad configuration",
        CONFLICT: "another integrator holds the work directory's lock",
    },
    "agentc-push": {INVALID_INPUT: "bad arguments"},
    "agentc-host": {
        FAILED: "a check or a setup step failed, or an update was rolled back",
        INVALID_INPUT: "bad settings, a refused release, or ROLLBACK FAILED (the seed's status)",
    },
    "agentc-attention": {
        FAILED: "a check or the canary fails",
        INVALID_INPUT: "bad configuration",
        TRANSPORT: "a page or the digest's mail could not be delivered (retried next run)",
    },
}


def describe(problem: BaseException | str) -> str:
    """One line naming ``problem``: an error's message, an OS error's file and reason."""
    if isinstance(problem, OSError):
        reason = problem.strerror or str(problem)
        return f"{problem.filename}: {reason}" if problem.filename else reason
    return str(problem)


def fail(program: str, problem: BaseException | str, status: int = INVALID_INPUT) -> NoReturn:
    """Name ``problem`` on standard error as ``program`` and exit with ``status``."""
    print(f"{program}: {describe(problem)}", file=sys.stderr, flush=True)
    sys.exit(status)
