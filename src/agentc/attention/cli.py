"""``agentc-attention [--config PATH] check|digest|canary|units`` (docs/attention.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import click

from agentc.attention import canary as canary_job
from agentc.attention import digest as digest_job
from agentc.attention import watch
from agentc.attention.config import DEFAULT_CONFIG, AttentionConfig
from agentc.attention.paging import read_secret
from agentc.attention.units import Plan, generate
from agentc.core.errors import AgentcError, ConfigError
from agentc.files import exits, locks
from agentc.files.exits import INVALID_INPUT
from agentc.files.options import config_option

PROGRAM = "agentc-attention"


def fail(problem: BaseException | str, status: int = INVALID_INPUT) -> NoReturn:
    exits.fail(PROGRAM, problem, status)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@contextlib.contextmanager
def locked(state_dir: Path, name: str) -> Iterator[None]:
    """One run at a time per state directory and job (a second waits for the first)."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with locks.locked(state_dir / f"{name}.lock"):
        yield


def load(
    path: Path | None, *, state_dir: Path | None = None, heartbeat: Path | None = None
) -> AttentionConfig:
    """The configuration, with a hand test's own state directory or heartbeat file."""
    config = AttentionConfig.load(path or DEFAULT_CONFIG, what="attention configuration")
    if heartbeat is not None:
        checks = dataclasses.replace(config.checks, heartbeat=heartbeat.absolute())
        config = dataclasses.replace(config, checks=checks)
    if state_dir is not None:
        config = dataclasses.replace(config, state_dir=state_dir.absolute())
    return config


@click.group()
@config_option("attention")
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """Paging, the digest by mail and the end-to-end canary of one agentc project."""
    os.umask(0o077)
    ctx.obj = config_path


@main.command()
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Another state directory (its own paged set), for a hand test.",
)
@click.option(
    "--heartbeat",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Another heartbeat file (a missing one fails the heartbeat check).",
)
@click.pass_context
def check(ctx: click.Context, state_dir: Path | None, heartbeat: Path | None) -> None:
    """Run every check; page what newly fails and note what recovered.

    Exit 0 healthy, 1 a check fails, 7 a page could not be delivered (retried next run)."""
    try:
        config = load(ctx.obj, state_dir=state_dir, heartbeat=heartbeat)
        token = read_secret(config.token_file, "token_file")
        with locked(config.state_dir, "check"):
            code = watch.run(config, token, now_ms)
    except (AgentcError, OSError) as exc:
        fail(exc)
    sys.exit(code)


@main.command()
@click.pass_context
def digest(ctx: click.Context) -> None:
    """Print the project's attention digest; with [mail], mail it with an "I read this" link.

    Exit 0 done, 7 the mail was not sent, 2 the digest could not be read."""
    try:
        config = load(ctx.obj)
        token = read_secret(config.token_file, "token_file")
        code = digest_job.run(config, token)
    except (AgentcError, OSError) as exc:
        fail(exc)
    sys.exit(code)


@main.command()
@click.option(
    "--harness", required=True, help="The harness this run canaries (one of [canary] harnesses)."
)
@click.pass_context
def canary(ctx: click.Context, harness: str) -> None:
    """File one trivial task in the canary project, wait for it, record, report and page.

    Exit 0 passed, 1 failed or timed out, 7 a page could not be delivered."""
    try:
        config = load(ctx.obj)
        if harness not in config.canary.harnesses:
            known = ", ".join(config.canary.harnesses)
            raise ConfigError(f"--harness {harness}: not in [canary] harnesses ({known})")
        with locked(config.state_dir, "canary"):
            code = canary_job.run(config, harness, now_ms)
    except (AgentcError, OSError) as exc:
        fail(exc)
    sys.exit(code)


@main.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="The folder to write into (e.g. /etc/systemd/system, or /etc/cron.d with --cron).",
)
@click.option("--check-interval", default="10min", show_default=True)
@click.option("--digest-calendar", default="daily", show_default=True)
@click.option("--canary-calendar", default="*-*-* 00:00:00", show_default=True)
@click.option("--harness", "harnesses", multiple=True, help="A canary timer per harness.")
@click.option("--cron", is_flag=True, help="One /etc/cron.d file instead of systemd units.")
@click.pass_context
def units(
    ctx: click.Context,
    out: Path,
    check_interval: str,
    digest_calendar: str,
    canary_calendar: str,
    harnesses: tuple[str, ...],
    cron: bool,
) -> None:
    """Generate the systemd timer units (or cron lines) of this host's attention jobs."""
    try:
        config_path = (ctx.obj or DEFAULT_CONFIG).absolute()
        config = load(config_path)
        plan = Plan(
            program=str(Path(sys.argv[0]).absolute()),
            config=config_path,
            state_dir=config.state_dir,
            check_interval=check_interval,
            digest_calendar=digest_calendar,
            canary_calendar=canary_calendar,
            harnesses=harnesses,
        )
        for path in generate(plan, out, cron):
            click.echo(str(path))
    except (AgentcError, OSError) as exc:
        fail(exc)


if __name__ == "__main__":  # python -m agentc.attention.cli
    main()
