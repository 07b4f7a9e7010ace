"""``agentc-integrator [--config PATH] run [--once]`` and ``signing-key create|rotate``
(docs/integrator.md)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import NoReturn

import click

from agentc.client.errors import TransportFailure
from agentc.client.transport import Transport
from agentc.core.errors import AgentcError, ConfigError, CoordinatorError
from agentc.files import locks
from agentc.files.exits import CONFLICT, FAILED, INVALID_INPUT, fail
from agentc.files.options import config_option
from agentc.integrator import signing
from agentc.integrator.checks import CheckRunner
from agentc.integrator.config import DEFAULT_CONFIG, IntegratorConfig, load_config
from agentc.integrator.coordinator import Coordinator, read_token
from agentc.integrator.engine import Integrator
from agentc.integrator.repo import GitFailure
from agentc.integrator.signing import SigningKey


def _fail(problem: BaseException | str, status: int) -> NoReturn:
    fail("agentc-integrator", problem, status)


@click.group()
@config_option("integrator")
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
        key = config.signing()
        if key is not None:  # signs every landing: checked before anything is done
            signing.write_allowed_signers(key)
    except ConfigError as exc:
        _fail(exc, INVALID_INPUT)
    lock = _lock(config.work_dir)
    try:
        sys.exit(_serve(config, token, once))
    finally:
        os.close(lock)


@main.group("signing-key")
def signing_key() -> None:
    """The SSH key every landed commit is signed with (``signing_key``)."""


def _signing(ctx: click.Context) -> tuple[IntegratorConfig, SigningKey]:
    try:
        config = load_config(ctx.obj)
    except ConfigError as exc:
        _fail(exc, INVALID_INPUT)
    key = config.signing()
    if key is None:
        _fail(f"{ctx.obj or DEFAULT_CONFIG}: signing_key: not configured", INVALID_INPUT)
    return config, key


@signing_key.command("create")
@click.pass_context
def signing_create(ctx: click.Context) -> None:
    """Make the key (unless it exists) and write the allowed-signers file."""
    _config, key = _signing(ctx.find_root())
    try:
        click.echo(f"agentc-integrator: {signing.create(key)}")
    except (ConfigError, OSError) as exc:
        _fail(exc, INVALID_INPUT)


@signing_key.command("rotate")
@click.pass_context
def signing_rotate(ctx: click.Context) -> None:
    """Replace the key; the retired one verifies only what it signed before (stop the
    integrator first: the work directory's lock is taken)."""
    config, key = _signing(ctx.find_root())
    lock = _lock(config.work_dir)
    try:
        click.echo(f"agentc-integrator: {signing.rotate(key)}")
    except (ConfigError, OSError) as exc:
        _fail(exc, INVALID_INPUT)
    finally:
        os.close(lock)


def _lock(work_dir: Path) -> int:
    """One integrator per work directory: its journal is the exactly-once record."""
    try:
        work_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = locks.hold(work_dir / "lock")
    except OSError as exc:
        _fail(f"work_dir: {work_dir}: {exc.strerror}", INVALID_INPUT)
    if fd is None:
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
