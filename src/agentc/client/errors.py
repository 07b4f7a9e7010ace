"""The client's errors, the one table that names them and gives their exit codes, and the one
report both front ends make of them.

    AgentcError (agentc.core.errors)
    ├── CoordinatorError        the service refused: rebuilt from its error envelope
    ├── ConfigError             bad input: a file, flag or value is wrong          exit 2
    │   └── SetupRequired       credentials, binding or session missing or unsafe  exit 3
    ├── TransportFailure        no definitive answer (network, redirect, 429, 5xx) exit 7
    │   └── BadAnswer           an answer not of the shape a program reads         exit 7
    ├── MutationPending         an earlier mutation is unresolved: run `retry`     exit 7
    ├── LocalConflict           local state refuses (a git branch exists, ...)     exit 5
    └── CandidateRefused        the push helper refused the candidate (a secret)   exit 6

Exit codes: 0 ok, 2 invalid input, 3 authentication or setup, 4 denied, 5 conflict,
6 unsatisfied requirements, 7 transport or temporary failure.

Both front ends report an error the same way (`report`, `run`): one line `error: <code>:
<message> [details]` on stderr, and the same fields (`error_report`) as JSON for `--json` and as
the MCP adapter's error result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypedDict

import click

from agentc.core.errors import AgentcError, ConfigError, CoordinatorError
from agentc.files.exits import (  # the one table of every program's exit statuses
    AUTHENTICATION,
    CONFLICT,
    DENIED,
    INVALID_INPUT,
    OK,
    TRANSPORT,
    UNSATISFIED,
)

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


class BadAnswer(TransportFailure):
    """An answer whose shape is not what the reading program acts on (client/reads.py)."""


class MutationPending(AgentcError):
    """A journaled mutation has no definitive answer yet; only `retry` may proceed."""


class CandidateRefused(AgentcError):
    """The candidate push helper refused to publish (a secret in the candidate, a moved ref)."""


class LocalConflict(AgentcError):
    """Local state (a git branch, a worktree, the session file) refuses the operation."""


# Each error raised on this machine: the code it is reported with and its exit code (the first
# class that matches wins). A refusal carries the coordinator's code; its exit code follows the
# code and the HTTP status (`status_exit_code`). Anything else is internal_error, exit 1.
LOCAL_ERRORS: tuple[tuple[type[AgentcError], str, int], ...] = (
    (MutationPending, "mutation_pending", TRANSPORT),
    (BadAnswer, "bad_answer", TRANSPORT),
    (TransportFailure, "transport_failed", TRANSPORT),
    (SetupRequired, "setup_required", AUTHENTICATION),
    (ConfigError, "invalid_input", INVALID_INPUT),
    (LocalConflict, "local_conflict", CONFLICT),
    (CandidateRefused, "candidate_refused", UNSATISFIED),
)


def exit_code(exc: BaseException) -> int:
    """The documented exit code for an error."""
    if isinstance(exc, CoordinatorError):
        return status_exit_code(exc.status, exc.code)
    return next((code for kind, _name, code in LOCAL_ERRORS if isinstance(exc, kind)), 1)


def error_code(exc: BaseException) -> str:
    if isinstance(exc, CoordinatorError):
        return exc.code
    return next(
        (name for kind, name, _code in LOCAL_ERRORS if isinstance(exc, kind)), "internal_error"
    )


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


class ErrorReport(TypedDict):
    code: str
    message: str
    details: dict[str, Any]
    exit_code: int


def error_report(exc: BaseException) -> ErrorReport:
    """What both front ends say about an error: its code, message, details and exit code."""
    refusal = exc if isinstance(exc, CoordinatorError) else None
    return {
        "code": error_code(exc),
        "message": refusal.message if refusal else str(exc),
        "details": refusal.details if refusal else {},
        "exit_code": exit_code(exc),
    }


def report(exc: BaseException, as_json: bool) -> int:
    """Print the error (one line on stderr; with `as_json` also `{"error": ...}` on stdout) and
    return its exit code."""
    err = error_report(exc)
    line = f"error: {err['code']}: {err['message']}"
    if err["details"]:
        line += " " + json.dumps(err["details"], ensure_ascii=False)
    click.echo(line, err=True)
    if as_json:
        click.echo(json.dumps({"error": err}, indent=2, ensure_ascii=False))
    return err["exit_code"]


def run(
    command: click.Command,
    prog: str,
    argv: list[str] | None = None,
    *,
    obj: object = None,
    as_json: Callable[[], bool] = lambda: False,
) -> int:
    """Run a front end's command; the exit code (never raises, never prints a traceback).
    `as_json` says, once the command line is parsed, whether errors are also JSON."""
    try:
        rv = command.main(args=argv, prog_name=prog, standalone_mode=False, obj=obj)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return INVALID_INPUT
    except click.Abort:
        click.echo("error: aborted", err=True)
        return 1
    except AgentcError as exc:
        return report(exc, as_json())
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        return 130
    except Exception as exc:
        click.echo(f"error: internal_error: {type(exc).__name__}: {exc}", err=True)
        return 1
    return rv if isinstance(rv, int) else 0
