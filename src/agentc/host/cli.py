"""``agentc-host [--config host.toml] setup|check|update|service`` (docs/host.md).

Every refusal is one line ``agentc-host: <problem>``, never a traceback: a bad setting or
command-line value exits 2, a refused or failed step 1 (``update`` has its own codes).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from agentc.core.errors import AgentcError, ConfigError
from agentc.host.settings import HostSettings, load_settings

EXIT_PROBLEMS = 1
EXIT_CONFIG = 2
F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = EXIT_CONFIG) -> NoReturn:
    click.echo(f"agentc-host: {message}", err=True)
    sys.exit(code)


class Group(click.Group):
    """Turns every deliberate agentc error and host error into one line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            fail(str(exc), EXIT_CONFIG)
        except AgentcError as exc:
            fail(str(exc), EXIT_PROBLEMS)
        except OSError as exc:
            fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "), EXIT_PROBLEMS)


def settings_of(ctx: click.Context) -> tuple[HostSettings, Path | None]:
    path: Path | None = ctx.obj
    return load_settings(path), (path.absolute() if path is not None else None)


def need_root() -> None:
    if os.geteuid() != 0:
        fail("this needs root (or --prefix DIR to write into a folder)", EXIT_PROBLEMS)


@click.group(cls=Group)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The host settings (default /etc/agentc/host.toml; missing: the defaults).",
)
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """Set up, check and update a supervised agentc host."""
    os.umask(0o022)
    ctx.obj = config_path


@main.command()
@click.option(
    "--prefix",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Write everything below this folder instead (owners and accounts are recorded).",
)
@click.option("--uninstall", is_flag=True, help="Stop and remove what setup installed.")
@click.pass_context
def setup(ctx: click.Context, prefix: Path | None, uninstall: bool) -> None:
    """Make the accounts, state layout, seeds, settings, units and timers; idempotent."""
    from agentc.host import setup as setup_mod
    from agentc.host import uninstall as uninstall_mod

    settings, path = settings_of(ctx)
    if prefix is None:
        need_root()
    else:
        prefix = prefix.absolute()
        prefix.mkdir(parents=True, exist_ok=True)
    if uninstall:
        report = uninstall_mod.uninstall(settings, prefix)
    else:
        report = setup_mod.setup(settings, path, prefix)
    for line in report.problems:
        click.echo(f"refused: {line}", err=True)
    if report.problems and not report.changes:
        fail(f"{len(report.problems)} problem(s) above; nothing was changed", EXIT_PROBLEMS)
    for line in report.changes:
        click.echo(line)
    for line in report.notes:
        click.echo(line)
    for line in report.steps:
        click.echo(f"next: {line}")
    count = len(report.changes)
    click.echo(f"{count} change(s)" if count else "nothing changed")
    if report.problems:
        sys.exit(EXIT_PROBLEMS)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the lines.")
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """The containment suite, from inside real launches as each role's account: one PASS or
    FAIL line per check; exit 1 on any FAIL."""
    import json

    from agentc.host.check import run_suite

    need_root()
    settings, _ = settings_of(ctx)
    results = run_suite(settings)
    failed = [r for r in results if not r.passed]
    if as_json:
        checks = [{"name": r.name, "pass": r.passed, "detail": r.detail} for r in results]
        click.echo(json.dumps({"ok": not failed, "checks": checks}))
    else:
        for result in results:
            click.echo(result.line())
        if failed:
            click.echo(f"containment suite: {len(failed)} of {len(results)} checks FAILED")
        else:
            click.echo(f"containment suite: all {len(results)} checks passed")
    sys.exit(EXIT_PROBLEMS if failed else 0)


@main.command(hidden=True)
@click.argument("name")
@click.pass_context
def service(ctx: click.Context, name: str) -> None:
    """Run one of the host's services (what its unit or cron line runs)."""
    from agentc.host import servicectl

    need_root()
    settings, _ = settings_of(ctx)
    sys.exit(servicectl.serve(settings, name))


if __name__ == "__main__":  # python -m agentc.host.cli
    main()
