"""``agentc-integrator [--config PATH] run [--once]`` (docs/integrator.md)."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

import click

from agentc.client.errors import TransportFailure
from agentc.client.transport import Transport
from agentc.core.errors import AgentcError, ConfigError, CoordinatorError
from agentc.files.exits import CONFLICT, FAILED, INVALID_INPUT, fail
from agentc.integrator.checks import CheckRunner
from agentc.integrator.config import IntegratorConfig, load_config
from agentc.integrator.coordinator import Coordinator, read_token
from agentc.integrator.engine import Integrator
from agentc.integrator.repo import GitFailure


def _fail(problem: BaseException | str, status: int) -> NoReturn:
    fail("agentc-integrator", problem, status)


@click.group()
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The configuration file (default /etc/agentc/integrator.toml).",
)
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """The deterministic integrator: lands approved code submissions."""
    ctx.obj = config_path


@main.command()
@click.option("--once", is_flag=True, help="One poll, then exit.")
@click.pass_context
def run(ctx: click.Context, once: bool) -> None:
    """Poll for approved candidates and land them (or send them back)."""
    try:
        config = load_config(ctx.obj)
        token = read_token(config.credential_file)
    except ConfigError as exc:
        _fail(exc, INVALID_INPUT)
    try:
        config.work_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = _lock(config.work_dir)
    except OSError as exc:
        _fail(f"work_dir: {config.work_dir}: {exc.strerror}", INVALID_INPUT)
    try:
        sys.exit(_serve(config, token, once))
    finally:
        os.close(lock)


def _lock(work_dir: Path) -> int:
    """One integrator per work directory: its journal is the exactly-once record."""
    fd = os.open(work_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        _fail(f"another integrator holds {work_dir / 'lock'}", CONFLICT)
    return fd


def _serve(config: IntegratorConfig, token: str, once: bool) -> int:
    try:
        runner = CheckRunner(config)
    except AgentcError as exc:
        _fail(exc, FAILED)
    with Transport(config.coordinator_origin(), token) as transport:
        integrator = Integrator(config, Coordinator(transport, config.project_id), runner)
        try:
            while True:
                try:
                    integrator.poll()
                except (
                    CoordinatorError,
                    TransportFailure,
                    GitFailure,
                    AgentcError,
                    OSError,
                ) as exc:
                    click.echo(f"agentc-integrator: poll failed: {exc}", err=True)
                    if once:
                        return 1
                if once:
                    return 0
                time.sleep(config.poll_seconds)
        finally:
            integrator.close()


if __name__ == "__main__":  # python -m agentc.integrator.cli
    main()
