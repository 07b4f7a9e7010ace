"""`agent-coordinator`: the agent's command line for the coordinator.

Every verb takes `--json` (machine output on stdout); human output is Rich tables. Errors print
the coordinator's code and message on stderr and exit with the documented code (see
`agentc.client.errors`); there is never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from agentc.client import errors, render
from agentc.client.config import Options, resolve
from agentc.client.journal import Outcome
from agentc.client.ops import Agent
from agentc.client.sessions import DEFAULT_HARNESS
from agentc.core.errors import ConfigError
from agentc.core.model import Role, TaskKind

F = TypeVar("F", bound=Callable[..., Any])
PROG = "agent-coordinator"


@dataclass
class Ctx:
    options: Options = field(default_factory=Options)
    json: bool = False
    _agent: Agent | None = None

    def agent(self) -> Agent:
        if self._agent is None:
            self._agent = Agent(resolve(self.options))
        return self._agent

    def close(self) -> None:
        if self._agent is not None:
            self._agent.close()
            self._agent = None


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Ctx).json = True


def json_option(fn: F) -> F:
    return click.option(
        "--json",
        "json_output",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print the result as JSON on stdout.",
    )(fn)


def input_option(what: str, *, required: bool = True) -> Callable[[F], F]:
    """`--input FILE|-`: a JSON object (`read_input`), described by `what`."""
    return click.option("--input", "source", required=required, metavar="FILE|-", help=what)


def read_input(source: str) -> dict[str, Any]:
    """A JSON object from a file, or from stdin for `-`."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the input file {source}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the input {source} is not UTF-8 text") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the input {source} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"the input {source} must be a JSON object, not {type(data).__name__}")
    return data


def emit(result: Any, renderer: render.Renderer = render.generic) -> None:
    ctx = click.get_current_context().find_object(Ctx)
    data = result.data if isinstance(result, Outcome) else result
    if ctx is not None and ctx.json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console = Console(file=sys.stdout, soft_wrap=False)
    if isinstance(result, Outcome) and result.replayed:
        console.print("(the coordinator replayed its stored answer to this request)")
    renderer(console, data)


def agent() -> Agent:
    return click.get_current_context().ensure_object(Ctx).agent()


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit codes: "
    + "; ".join(f"{code} {meaning}" for code, meaning in errors.EXIT_CODES.items()),
)
@click.option(
    "--session",
    metavar="NAME",
    help="Session state name (one per harness). Default: AGENT_COORDINATOR_SESSION or 'default'.",
)
@click.option(
    "--state-dir",
    metavar="ABS",
    help="State directory (absolute). "
    "Default: AGENT_COORDINATOR_STATE_DIR or ~/.local/state/agent-coordinator.",
)
@click.option(
    "--repo-config",
    metavar="PATH",
    help="The repository binding to use. "
    "Default: AGENT_COORDINATOR_REPO_CONFIG or .agent-coordinator.toml found upwards.",
)
@click.option(
    "--allow-insecure-loopback", is_flag=True, help="Allow plain http to a loopback coordinator."
)
@json_option
@click.pass_context
def cli(
    ctx: click.Context,
    session: str | None,
    state_dir: str | None,
    repo_config: str | None,
    allow_insecure_loopback: bool,
) -> None:
    """Talk to the agent coordinator: sessions, tasks, leases, submissions and reviews."""
    obj = ctx.ensure_object(Ctx)
    obj.options = replace(
        obj.options,
        session=session,
        state_dir=state_dir,
        repo_config=repo_config,
        allow_insecure_loopback=allow_insecure_loopback,
    )
    ctx.call_on_close(obj.close)


@cli.command()
@click.option("--harness", default=DEFAULT_HARNESS, show_default=True, help="Harness name.")
@click.option("--workstation", metavar="ID", help="Workstation id to record.")
@click.option("--capability", multiple=True, metavar="CAP", help="A capability (repeatable).")
@click.option("--new", is_flag=True, help="Open a new session even if one is stored.")
@json_option
def connect(harness: str, workstation: str | None, capability: tuple[str, ...], new: bool) -> None:
    """Open an agent session (reuses the stored session unless --new).

    The session id and its proof are made here and journaled before the request is sent, so
    if the answer is lost, `retry` recovers the same session."""
    emit(agent().connect(harness, workstation, capability, new))


@cli.command()
@json_option
def status() -> None:
    """Show the local session state: session, pending mutation, held attempt and review."""
    emit(agent().status(), render.status)


@cli.group()
def session() -> None:
    """The agent session as the coordinator sees it."""


@session.command("show")
@json_option
def session_show() -> None:
    """Show the stored session from the coordinator, with the attempts it holds."""
    emit(agent().session_show(), render.session)


@cli.command("next")
@click.option(
    "--role",
    type=click.Choice([role.value for role in Role]),
    default=Role.IMPLEMENTER.value,
    show_default=True,
)
@json_option
def next_(role: str) -> None:
    """Ask what to do next (a task to claim or recover, or a review)."""
    emit(agent().next(Role(role)), render.next_action)


@cli.group()
def tasks() -> None:
    """Create, list and show tasks."""


@tasks.command("create")
@input_option("Task JSON.")
@json_option
def tasks_create(source: str) -> None:
    """Create a task from JSON (title, acceptance_criteria, kind, priority, ...)."""
    emit(agent().tasks_create(read_input(source)), render.created_task)


@tasks.command("list")
@click.option("--limit", type=click.IntRange(1, 200), default=50, show_default=True)
@click.option("--cursor", help="Continue after this cursor.")
@click.option("--status", "work_status", help="Only tasks in this work status.")
@json_option
def tasks_list(limit: int, cursor: str | None, work_status: str | None) -> None:
    """List the project's tasks."""
    emit(agent().tasks_list(limit, cursor, work_status), render.task_list)


@tasks.command("show")
@click.option("--id", "task_id", required=True, help="The task id.")
@json_option
def tasks_show(task_id: str) -> None:
    """Show one task with its attempts and workflow."""
    emit(agent().task_show(task_id), render.task)


def attempt_options(fn: F) -> F:
    fn = click.option("--generation", type=int, help="Its generation (default: the held one).")(fn)
    return click.option("--attempt", "attempt_id", help="Attempt id (default: the held one).")(fn)


@cli.command()
@click.option("--task", "task_id", help="Claim this task (default: the next ready one).")
@click.option("--revision", type=int, help="The task revision you read (default: fetched).")
@json_option
def claim(task_id: str | None, revision: int | None) -> None:
    """Claim a task: the next ready one, or --task ID."""
    emit(agent().claim(task_id, revision), render.claim)


@cli.command()
@attempt_options
@json_option
def renew(attempt_id: str | None, generation: int | None) -> None:
    """Renew the held attempt's lease."""
    emit(agent().renew(attempt_id, generation), render.attempt)


@cli.command()
@click.option("--summary", required=True, help="What was done so far.")
@click.option("--handoff", help="What a successor needs to know.")
@click.option("--current-action", help="What is being done now.")
@click.option("--next-step", help="What comes next.")
@click.option("--revision", help="The commit sha reached (40 or 64 hex).")
@click.option(
    "--push-wip",
    "push_wip",
    is_flag=True,
    help="First publish --revision as a create-only WIP ref through the candidate push helper.",
)
@click.option(
    "--checkout",
    type=click.Path(file_okay=False, exists=True),
    default=".",
    show_default=True,
    help="With --push-wip: the checkout holding the revision.",
)
@attempt_options
@json_option
def checkpoint(
    summary: str,
    attempt_id: str | None,
    generation: int | None,
    push_wip: bool,
    checkout: str,
    **notes: str | None,
) -> None:
    """Record progress on the held attempt (does not renew the lease)."""
    out = agent().checkpoint(
        summary,
        attempt_id=attempt_id,
        generation=generation,
        push_wip=checkout if push_wip else None,
        **notes,
    )
    emit(out, render.attempt)


@cli.command()
@click.option("--handoff", required=True, help="What a successor needs to know.")
@click.option("--blocked", is_flag=True, help="Mark the task blocked (the handoff says why).")
@attempt_options
@json_option
def release(handoff: str, blocked: bool, attempt_id: str | None, generation: int | None) -> None:
    """Give the held attempt back (exit 5 means it was already released or lost)."""
    emit(agent().release(handoff, blocked, attempt_id, generation), render.attempt)


@cli.group()
def submissions() -> None:
    """Submit the held attempt's work."""


@submissions.command("general")
@input_option("JSON: summary, acceptance_evidence, handoff, ac_amendment.")
@attempt_options
@json_option
def submissions_general(source: str, attempt_id: str | None, generation: int | None) -> None:
    """Submit a general (non-code) task's result."""
    out = agent().submit(
        TaskKind.GENERAL, read_input(source), attempt_id=attempt_id, generation=generation
    )
    emit(out, render.submission)


@submissions.command("code")
@input_option(
    "JSON: summary, acceptance_evidence, handoff, and optionally candidate_ref, "
    "candidate_revision, base_revision."
)
@click.option(
    "--checkout",
    type=click.Path(file_okay=False),
    help="The checkout holding the candidate (default: the prepared worktree).",
)
@click.option(
    "--push",
    "remote",
    metavar="REMOTE",
    help="Publish the candidate ref to this git remote first (create-only, verified).",
)
@attempt_options
@json_option
def submissions_code(
    source: str,
    checkout: str | None,
    remote: str | None,
    attempt_id: str | None,
    generation: int | None,
) -> None:
    """Submit code: the candidate ref and revision, filled from the worktree when absent."""
    out = agent().submit(
        TaskKind.CODE,
        read_input(source),
        attempt_id=attempt_id,
        generation=generation,
        checkout=checkout,
        push=remote,
    )
    emit(out, render.submission)


@cli.group()
def reviews() -> None:
    """Find, claim and decide reviews."""


@reviews.command("next")
@json_option
def reviews_next() -> None:
    """The next review you may take."""
    emit(agent().next(Role.REVIEWER), render.next_action)


@reviews.command("claim")
@click.option("--activity", "activity_id", help="Activity id (default: the next review).")
@click.option("--submission", "submission_id", help="The submission under review.")
@json_option
def reviews_claim(activity_id: str | None, submission_id: str | None) -> None:
    """Claim a review: the next one, or --activity with --submission."""
    emit(agent().review_claim(activity_id, submission_id), render.review_claim)


@reviews.command("decide")
@input_option("JSON: decision, summary, findings, amendment_decision.")
@click.option("--activity", "activity_id", help="Activity id (default: the held review).")
@json_option
def reviews_decide(source: str, activity_id: str | None) -> None:
    """Decide the held review (approved or changes_requested)."""
    emit(agent().review_decide(read_input(source), activity_id), render.decision)


@reviews.command("release")
@click.option("--summary", required=True, help="Why the review is given back undecided.")
@click.option("--activity", "activity_id", help="Activity id (default: the held review).")
@click.option("--generation", type=int, help="The review attempt's generation (default: held).")
@json_option
def reviews_release(summary: str, activity_id: str | None, generation: int | None) -> None:
    """Give the held review back to the queue undecided."""
    emit(agent().review_release(summary, activity_id, generation), render.generic)


@cli.group()
def worktree() -> None:
    """The attempt's local git checkout."""


@worktree.command("prepare")
@click.option(
    "--source",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="The clone to add the worktree to.",
)
@click.option("--path", type=click.Path(), help="Where (default: <state>/worktrees/<attempt>).")
@click.option("--base", default="HEAD", show_default=True, help="The base revision.")
@click.option("--attempt", "attempt_id", help="Attempt id (default: the held one).")
@json_option
def worktree_prepare(source: str, path: str | None, base: str, attempt_id: str | None) -> None:
    """Add the attempt's checkout as a git worktree on branch agentc/<session> and register
    it with the coordinator (run it again to register a worktree whose registration failed)."""
    emit(agent().prepare_worktree(source, path, base, attempt_id))


@cli.command()
@click.option("--method", required=True, help="GET, POST, PATCH, PUT or DELETE.")
@click.option("--path", "api_path", required=True, help="An /api/v1/... path.")
@input_option("JSON body.", required=False)
@json_option
def request(method: str, api_path: str, source: str | None) -> None:
    """Raw API call (journaled like every mutation)."""
    body = read_input(source) if source else None
    emit(agent().request(method, api_path, body))


@cli.command()
@json_option
def retry() -> None:
    """Resend the pending mutation with its original Idempotency-Key."""
    out = agent().retry()
    if out is None:
        emit({"retried": None, "message": "nothing is pending"})
        return
    emit(out)


def run(argv: list[str] | None = None) -> int:
    """Run one command; the exit code (never raises, never prints a traceback)."""
    obj = Ctx()
    try:
        return errors.run(cli, PROG, argv, obj=obj, as_json=lambda: obj.json)
    finally:
        obj.close()


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":  # python -m agentc.client.cli
    main()
