"""``agentns-claude``: run a command inside an agent session whose id exists before it starts.

Order of work: validate the intent, parse ``--budget``, establish the session
(:func:`agentc.agentns.resolve.establish`, the ladder; it logs the session with ``--verbose``),
log the budget with ``--verbose``, write ``--record``, start the userspace budget enforcement,
then exec the command in place: same pid, and its exit status is ours.
Launcher errors exit 2, a missing program 127, a non-executable one 126.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from collections.abc import Sequence
from typing import NamedTuple

from agentc.agentns import enforce
from agentc.agentns.budget import Budget, parse_budget
from agentc.agentns.errors import AgentnsError, BudgetError
from agentc.agentns.launch import (
    ENV_BUDGET_ENFORCED,
    ENV_BUDGET_UNENFORCED,
    LAUNCHER,
    SessionRecord,
    write_record,
)
from agentc.agentns.resolve import establish, say_stderr, validate_intent

EPILOG = """\
session id (exported as AGENTNS_SESSION_ID, with AGENTNS_INTENT and AGENTNS_MODE):
  1. mock: the file /tmp/agentns-mock (or $AGENTNS_MOCK_FILE) wins over
     $AGENTNS_SESSION_ID_OVERRIDE; prints "MOCK MODE: session_id=<id>".   mode mock
  2. --no-unshare: synthesized from uid, boot time and the monotonic clock. mode no-unshare
  3. stock kernel (no /proc/self/agent_session, assay agentns not Live, or
     prctl ENOSYS/EINVAL): synthesized id and a warning.                  mode synth-fallback
  4. prctl(PR_SET_AGENT_NS) + intent tag + id read back from procfs.     mode prctl
  EPERM from the prctl is fatal: re-run with CAP_SYS_ADMIN or use --no-unshare.

budget keys: wall=<n>[s|m|h], syscalls=<n>[e<n>], write_bytes=<n>[K|M|G|T], fork=<n>.
  Enforced in userspace: wall (SIGTERM, then SIGKILL of the process tree) and fork
  (RLIMIT_NPROC headroom; not for root). The child sees AGENTNS_BUDGET_ENFORCED and
  AGENTNS_BUDGET_UNENFORCED; unenforced keys are also reported on stderr.

exit status: the command's own; 2 for launcher errors, 126 not executable, 127 not found.

examples:
  agentns-claude --intent /build -- claude
  agentns-claude --intent headless:self-review --budget wall=600s -- ./review.sh
  agentns-claude --intent test --no-unshare -- bash
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentc")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    # Resolved only when asked: importlib.metadata costs start-up time on every launch.
    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        print(f"{LAUNCHER} {_version()}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=LAUNCHER,
        usage=(
            "%(prog)s --intent <tag> [--budget <spec>] [--no-unshare] [--verbose] "
            "[--record <path>] -- <cmd> [args...]"
        ),
        description="Run a command inside an agent session (wintermute agent namespace); "
        "the session id exists from the command's first instruction.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--intent",
        required=True,
        metavar="<tag>",
        help="intent tag (prctl PR_SET_AGENT_INTENT_TAG), e.g. /build, headless:<service>",
    )
    p.add_argument(
        "--budget",
        metavar="<spec>",
        help="comma-separated limits: wall=3600s,syscalls=1e7,write_bytes=10G,fork=1000",
    )
    p.add_argument(
        "--no-unshare",
        action="store_true",
        help="skip namespace creation; synthesize a session id (stock kernels)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="log the resolved mode, session id, intent and budget to stderr before exec",
    )
    p.add_argument(
        "--record",
        metavar="<path>",
        help="write the session id, mode and budget as JSON to <path> before exec",
    )
    p.add_argument("--version", action=_VersionAction, nargs=0, help="print the version")
    return p


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = _parser()
    if "--" in argv:
        cut = list(argv).index("--")
        before, command = list(argv[:cut]), list(argv[cut + 1 :])
    else:
        before, command = list(argv), []
    opts = parser.parse_args(before)  # exits 2 with the usage on a parse error
    if not command:
        parser.error("missing command: give it after --, e.g. -- claude")
    return opts, command


def _child_env(
    session: SessionRecord, budget: Budget | None, plan: enforce.Plan | None
) -> dict[str, str]:
    env = {**os.environ, **session.env()}
    if budget is not None and plan is not None:
        env[ENV_BUDGET_ENFORCED] = ",".join(plan.enforced)
        env[ENV_BUDGET_UNENFORCED] = ",".join(plan.unenforced)
    else:
        # Never let a nested launch inherit its parent's budget claim.
        env.pop(ENV_BUDGET_ENFORCED, None)
        env.pop(ENV_BUDGET_UNENFORCED, None)
    return env


class _Prepared(NamedTuple):
    env: dict[str, str]
    budget: Budget | None
    plan: enforce.Plan | None
    grace_s: float


def _prepare(opts: argparse.Namespace) -> _Prepared:
    """Everything before exec; raises :class:`AgentnsError` (exit 2) on any failure."""
    intent = validate_intent(opts.intent)  # before the budget, as the usage promises
    budget: Budget | None = None
    plan: enforce.Plan | None = None
    if opts.budget is not None:
        try:
            budget = parse_budget(opts.budget)
        except BudgetError as exc:
            raise BudgetError(f"--budget: {exc}") from None
        plan = enforce.plan_budget(budget)
    grace_s = enforce.grace_from_env(os.environ) if plan and "wall" in plan.enforced else 0.0

    session = establish(intent, no_unshare=opts.no_unshare, verbose=opts.verbose)
    if opts.verbose and budget is not None and plan is not None:
        say_stderr(f"budget={budget.raw}")
        say_stderr(
            f"budget enforced={','.join(plan.enforced) or '-'} "
            f"unenforced={','.join(plan.unenforced) or '-'}"
        )
    if plan is not None and plan.unenforced:
        # Reported on every launch, not only with --verbose: a budget is never dropped silently.
        detail = "; ".join(f"{k}: {why}" for k, why in plan.unenforced.items())
        say_stderr(f"WARNING: budget keys not enforced: {detail}")
    if opts.record is not None:
        write_record(
            opts.record,
            dataclasses.replace(
                session,
                budget=budget.raw if budget else None,
                budget_enforced=plan.enforced if plan else (),
                budget_unenforced=tuple(plan.unenforced) if plan else (),
            ),
        )
    env = _child_env(session, budget, plan)
    return _Prepared(env, budget, plan, grace_s)


def _enforce(budget: Budget, plan: enforce.Plan, grace_s: float) -> None:
    try:
        # The watchdog first: it is one more task of this uid, counted before the fork limit.
        if "wall" in plan.enforced and budget.wall_s is not None:
            enforce.start_wall_watchdog(budget.wall_s, grace_s)
        if "fork" in plan.enforced and budget.fork is not None:
            enforce.apply_fork_limit(budget.fork)
    except OSError as exc:
        raise AgentnsError(f"--budget: cannot enforce: {exc}") from None


def _exec(command: list[str], env: dict[str, str]) -> int:
    # Python ignores SIGPIPE and SIGXFSZ; an ignored disposition survives exec, so restore the
    # defaults or `cmd | head` would behave differently under the launcher.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)  # noqa: S606 - exec in place is the point
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 2
        if isinstance(exc, PermissionError):
            code = 126
        reason = f"{exc.strerror} (os error {exc.errno})" if exc.errno else str(exc)
        sys.stderr.write(f"{LAUNCHER}: exec {command[0]}: {reason}\n")
        return code
    except ValueError as exc:  # e.g. an embedded NUL byte in an argument
        sys.stderr.write(f"{LAUNCHER}: exec {command[0]}: {exc}\n")
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns only on failure (success replaces the process)."""
    opts, command = _parse(sys.argv[1:] if argv is None else argv)
    try:
        env, budget, plan, grace_s = _prepare(opts)
        if budget is not None and plan is not None:
            _enforce(budget, plan, grace_s)
    except AgentnsError as exc:
        sys.stderr.write(f"{LAUNCHER}: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130  # interrupted before exec (e.g. while waiting for assay): no traceback
    return _exec(command, env)
