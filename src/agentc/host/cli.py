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
from agentc.files import exits
from agentc.files.options import config_option
from agentc.host.settings import HostSettings, load_settings

EXIT_PROBLEMS = exits.FAILED
EXIT_CONFIG = exits.INVALID_INPUT
F = TypeVar("F", bound=Callable[..., Any])


def fail(problem: BaseException | str, code: int = EXIT_CONFIG) -> NoReturn:
    exits.fail("agentc-host", problem, code)


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
@config_option("host", missing="the defaults")
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


@main.command()
@click.option("--check", "check_only", is_flag=True, help="Verify and say what a run would do.")
@click.option("--retry", is_flag=True, help="Forget the rejected releases first.")
@click.option(
    "--rollback",
    type=click.Choice(["core", "harness"]),
    default=None,
    help="Return to what the last update replaced.",
)
@click.pass_context
def update(ctx: click.Context, check_only: bool, retry: bool, rollback: str | None) -> None:
    """Install the index's newest release if it verifies; roll back on any failed check.

    Exit 0 current, installed, promoted or deferred; 1 rolled back; 2 not attempted, or the
    rollback failed."""
    from agentc.host import servicectl
    from agentc.host.record import Machine
    from agentc.host.setup import init_of
    from agentc.host.update.run import Updater, locked
    from agentc.supervisor.config import SupervisorConfig

    need_root()
    settings, path = settings_of(ctx)
    with locked(settings) as ours:
        if not ours:
            click.echo("another update runs; nothing done")
            return
        config = SupervisorConfig.load(settings.supervisor_toml, what="supervisor configuration")
        init = init_of(settings, Machine(None, settings.record))
        updater = Updater(settings, path, config, servicectl.manager(settings, init, path),
                          lambda line: click.echo(f"update: {line}"))  # fmt: skip
        if rollback == "core":
            sys.exit(updater.rollback_core())
        if rollback == "harness":
            from agentc.host.update.harness import rollback_harness

            sys.exit(rollback_harness(updater))
        sys.exit(updater.run(check_only=check_only, retry=retry))


@main.command(name="release")
@click.option("--index", type=click.Path(path_type=Path, file_okay=False), required=True)
@click.option("--wheel", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              required=True, help="The agentc wheel (its version is the release's).")  # fmt: skip
@click.option("--dependencies", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=None, help="A folder of the wheels agentc needs.")  # fmt: skip
@click.option("--key", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              required=True, help="The signer's ssh private key.")  # fmt: skip
@click.option("--harness", "harnesses", multiple=True, metavar="NAME=VERSION=FILE",
              help="A harness binary the release pins.")  # fmt: skip
@click.option("--namespace", default="agentc-release", show_default=True)
@click.option("--no-latest", is_flag=True, help="Publish without pointing latest at it.")
def release_command(
    index: Path,
    wheel: Path,
    dependencies: Path | None,
    key: Path,
    harnesses: tuple[str, ...],
    namespace: str,
    no_latest: bool,
) -> None:
    """Publish a signed release into an index folder."""
    from agentc.host.update.publish import publish

    pins: dict[str, tuple[str, Path]] = {}
    for item in harnesses:
        name, _, rest = item.partition("=")
        version, _, file = rest.partition("=")
        if not (name and version and file):
            raise ConfigError(f"--harness {item!r}: use NAME=VERSION=FILE")
        pins[name] = (version, Path(file))
    deps = (
        sorted(p for p in dependencies.glob("*.whl") if p.name != wheel.name)
        if dependencies
        else []
    )
    version = publish(index, wheel, key, dependencies=deps, harnesses=pins, namespace=namespace,
                      latest=not no_latest)  # fmt: skip
    click.echo(f"published {version} in {index}")


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
