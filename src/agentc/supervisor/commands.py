"""The click application of ``agentc-supervisor``: preflight, launch, launch-root,
candidate-shell, model-gateway (and the relays).

The entry point is :func:`agentc.supervisor.cli.main`, which runs a plain ``launch`` command
line itself and hands everything else to :data:`main` here; the launch options parse into the
same parameters as :func:`agentc.supervisor.launch.request.parse_launch` gives. Every refusal
prints ``agentc-supervisor: <message>`` and exits 1; never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agentc.core.errors import AgentcError
from agentc.files.exits import FAILED, fail
from agentc.files.options import config_option
from agentc.supervisor.harness import registry
from agentc.supervisor.launch.request import (
    ROLES,
    LaunchRequest,
    launch_request,
    new_launch_id,
)

if TYPE_CHECKING:
    from agentc.supervisor.config import SupervisorConfig


def _config(ctx: click.Context) -> SupervisorConfig:
    obj: dict[str, Any] = ctx.ensure_object(dict)
    if "config" not in obj:
        from agentc.supervisor.config import load_config

        obj["config"] = load_config(obj.get("config_path"))
    config: SupervisorConfig = obj["config"]
    return config


def _request(params: dict[str, Any]) -> LaunchRequest:
    """The launch request of a command's launch options (``--session-id`` must be a UUID)."""
    value = params["launch_id"]
    try:
        launch_id = new_launch_id(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a UUID", param_hint="--session-id") from None
    return launch_request(params, launch_id)


def launch_options(func: Any) -> Any:
    """The launch-spec flags shared by preflight, launch and launch-root."""
    options = [
        click.option("--role", type=click.Choice(list(ROLES)), required=True),
        click.option(
            "--harness",
            type=click.Choice(list(registry.names())),
            default="claude",
            show_default=True,
        ),
        click.option("--run", "run", type=click.Path(path_type=Path), required=True),
        click.option("--clone", type=click.Path(path_type=Path), required=True),
        click.option("--model", default="default", show_default=True),
        click.option(
            "--session-id", "launch_id", default=None, help="the launch id, a UUID; new if absent"
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


# Commands whose modules are imported only when the command is run: the gateway pulls in
# uvicorn and httpx, the relays asyncio, which no other command should pay for.
LAZY_COMMANDS = {
    "model-gateway": "agentc.gateway.cli",
    "netns-relay": "agentc.egress.netns_relay_command",
    "egress-proxy": "agentc.egress.egress_command",
}


class Group(click.Group):
    """Turns every deliberate agentc error into one line and exit 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in LAZY_COMMANDS:
            return found
        import importlib

        command = getattr(importlib.import_module(LAZY_COMMANDS[cmd_name]), "command", None)
        return command if isinstance(command, click.Command) else None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (AgentcError, OSError) as exc:  # a host condition is named too, no traceback
            fail("agentc-supervisor", exc, FAILED)


@click.group(cls=Group)
@config_option("supervisor")
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """Launch agent harnesses in per-launch Bubblewrap sandboxes."""
    ctx.ensure_object(dict)["config_path"] = config_path


@main.command(context_settings={"ignore_unknown_options": True})
@launch_options
@click.option("--attempt", default=None, help="gateway: the attempt (default: the launch id)")
@click.option("--generation", type=click.IntRange(min=0), default=1, show_default=True)
@click.option("--task", default=None, help="gateway: the task its caps are counted under")
@click.option("--launch-usd", type=click.FloatRange(min=0), default=None, help="cost cap")
@click.option("--dry-run", is_flag=True, help="print the argv and environment, run nothing")
@click.argument("harness_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def launch(ctx: click.Context, /, dry_run: bool, **params: Any) -> None:
    """Run one harness in its sandbox; arguments after -- replace the harness flags."""
    from agentc.supervisor.launch.run import run_launch

    sys.exit(run_launch(_config(ctx), _request(params), dry_run))


@main.command(name="preflight")
@click.option("--role", type=click.Choice(list(ROLES)), default=None)
@click.option(
    "--harness", type=click.Choice(list(registry.names())), default="claude", show_default=True
)
@click.option("--run", "run", type=click.Path(path_type=Path), default=None)
@click.option("--clone", type=click.Path(path_type=Path), default=None)
@click.option("--model", default="default", show_default=True)
@click.option("--session-id", "launch_id", default=None, help="the launch id, a UUID")
@click.pass_context
def preflight_command(ctx: click.Context, /, **params: Any) -> None:
    """Check the host (both roles, every configured harness run in a real launch, addresses,
    layout, syscall filter, limits); with --role/--run/--clone, that launch instead. Prints
    {"ok": bool, "problems": [...]} (and "notes": [...] when the host leaves something
    unbounded); each host problem names its fix."""
    from agentc.supervisor.launch import preflight, preflight_host

    launch = [params[k] for k in ("role", "run", "clone")]
    if any(v is not None for v in launch) and not all(v is not None for v in launch):
        raise click.UsageError("checking a launch takes --role, --run and --clone together")
    config = _config(ctx)
    if params["role"] is None:
        problems, notes = preflight_host.host_report(config)
    else:  # that launch's checks, as every launch makes them, and the syscall filter
        problems = preflight.full_problems(config, _request(params))
        if not problems:  # a filter that cannot be built has a cause named above, if any
            problems = preflight_host.filter_problems()
        notes = []
    report: dict[str, Any] = {"ok": not problems, "problems": problems}
    if notes:  # what this host leaves unbounded but does not stop a launch
        report["notes"] = notes
    click.echo(json.dumps(report))
    sys.exit(0 if not problems else 1)


@main.command(name="launch-root", context_settings={"ignore_unknown_options": True})
@launch_options
@click.argument("harness_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def launch_root_command(ctx: click.Context, /, **params: Any) -> None:
    """As root: check the host, then run ``launch`` as the role account."""
    from agentc.supervisor.launch import root as launch_root

    config = _config(ctx)
    obj: dict[str, Any] = ctx.ensure_object(dict)
    sys.exit(launch_root.run_as_role(config, obj.get("config_path"), _request(params)))


@main.command(name="candidate-shell", context_settings={"ignore_unknown_options": True})
@click.option("--run", "run", type=click.Path(path_type=Path), required=True)
@click.option("--clone", type=click.Path(path_type=Path), required=True)
@click.option("--bwrap", type=click.Path(path_type=Path), required=True)
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
@click.option(
    "--timeout-seconds",
    type=click.FloatRange(min=0, min_open=True, max=86400),
    default=None,
    help="stop a command after this long (exit 252); default 45 minutes",
)
@click.option(
    "--plain",
    is_flag=True,
    help="a command: reviewer's call: -c '<command>' or a program and its arguments, in the "
    "clone, without Claude Code's working-directory protocol",
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def candidate_shell_command(
    run: Path,
    clone: Path,
    bwrap: Path,
    state_dir: Path,
    timeout_seconds: float | None,
    plain: bool,
    args: tuple[str, ...],
) -> None:
    """Run one reviewer command in the nested candidate sandbox (internal)."""
    from agentc.supervisor.launch import candidate_shell

    code = candidate_shell.main(
        run, clone, bwrap, state_dir, list(args), timeout_seconds, plain=plain
    )
    sys.exit(code)


@main.command(name="run")
@click.option("--once", is_flag=True, help="poll once (the launches it starts run to their end)")
@click.pass_context
def run_command(ctx: click.Context, /, once: bool) -> None:
    """The live loop: claim ready tasks and run them as confined launches (docs/supervisor.md)."""
    from agentc.supervisor.loop.run import Loop

    sys.exit(Loop(_config(ctx)).run(once))


@main.command(name="report-costs")
@click.pass_context
def report_costs_command(ctx: click.Context, /) -> None:
    """One pass of cost reporting by hand: print {accepted, duplicates, rejected, quarantined,
    pending}. Run it with the loop stopped or idle."""
    from agentc.supervisor.loop.run import Loop

    loop = Loop(_config(ctx))
    loop.start()
    summary = loop.report_costs(force=True)
    click.echo(json.dumps(summary.as_dict() if summary else {}))


if __name__ == "__main__":  # python -m agentc.supervisor.commands: always the click application
    main()
