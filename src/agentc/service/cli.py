"""`agent-coordinator-server`: run, migrate and bootstrap the coordinator."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from pydantic import ValidationError

from agentc.core.errors import AgentcError, ConfigError, CoordinatorError
from agentc.core.rules import NAME_RULE, is_name
from agentc.files import exits
from agentc.service.settings import (
    DEFAULT_PORT,
    ENVIRONMENT,
    POOL_OVERFLOW,
    POOL_SIZE_RANGE,
    WEEKLY_BUDGET_RANGE,
    WORKERS_RANGE,
    ServerSettings,
    parse_listen,
)
from agentc.store.engine import Database, migrate, open_engine
from agentc.store.tx import Executor, Tx

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _fail(problem: BaseException | str, status: int = exits.INVALID_INPUT) -> NoReturn:
    exits.fail("agent-coordinator-server", problem, status)


def _settings(ctx: click.Context, **overrides: Any) -> ServerSettings:
    obj = dict(ctx.obj)
    obj.update(overrides)
    if obj.get("database") is None:
        _fail(
            f"--database (or {ENVIRONMENT['database']}) is required: a SQLite file path or a "
            "postgresql:// URL"
        )
    try:
        return ServerSettings(**obj)
    except ConfigError as exc:
        _fail(str(exc))
        raise AssertionError from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        _fail(f"{where}: {first['msg'].removeprefix('Value error, ')}")
        raise AssertionError from exc


@contextmanager
def _database(settings: ServerSettings, *, create: bool) -> Iterator[Executor]:
    """Open (and migrate) the database; a file this command created is removed on failure."""
    db = Database.parse(settings.database)
    created = db.is_sqlite and not db.sqlite_path.exists()
    if not create and created:
        raise ConfigError(f"--database: {db.sqlite_path} does not exist")
    executor = None
    try:
        engine = open_engine(
            db,
            create=create,
            pool_size=settings.database_pool_size,
            max_overflow=POOL_OVERFLOW,
        )
        migrate(engine)
        executor = Executor(engine)
        yield executor
    except BaseException:
        if executor is not None:
            executor.close()
            executor = None
        if created:
            for suffix in ("", "-wal", "-shm"):
                Path(str(db.sqlite_path) + suffix).unlink(missing_ok=True)
        raise
    finally:
        if executor is not None:
            executor.close()


def _write_once(settings: ServerSettings, write: Callable[[Tx], T], *, create: bool = False) -> T:
    """A host command's one change: the database opened (and migrated; ``create``: a new SQLite
    file allowed), ``write`` run in one transaction, the database closed."""
    with _database(settings, create=create) as ex:
        return ex.write(write)


def _guard(fn: Callable[[], T]) -> T:
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    try:
        return fn()
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        _fail(f"the database refused or could not be reached: {reason}", exits.FAILED)
    except PoolTimeout as exc:
        _fail(f"no database connection came free in time; try again ({exc.args[0]})", exits.FAILED)
    except SQLAlchemyError as exc:  # without the driver's own error, its text is the reason
        reason = str(exc.args[0] if exc.args else type(exc).__name__).splitlines()[0]
        _fail(f"the database could not be used: {reason}", exits.FAILED)
    except CoordinatorError as exc:
        _fail(exc.message)
    except AgentcError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(exc)
    raise AssertionError


def _setting(name: str, **kwargs: Any) -> Callable[[F], F]:
    """The global option of a ServerSettings field: its default, help and one environment
    variable come from settings.py."""
    field = ServerSettings.model_fields[name]
    default = None if field.is_required() else field.default
    if isinstance(default, frozenset):  # a set of names is written comma-separated
        default = ",".join(sorted(default))
    return click.option(
        "--" + name.replace("_", "-"),
        envvar=ENVIRONMENT[name],
        default=default,
        help=field.description,
        **kwargs,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@_setting("database")
@_setting("public_origin", show_default=True)
@_setting("listen", show_default=True)
@_setting("allow_insecure_loopback", is_flag=True)
@_setting("canary_principals")
@_setting("agent_task_weekly_budget", type=click.IntRange(*WEEKLY_BUDGET_RANGE), show_default=True)
@_setting("trusted_proxy_header")
@_setting("workers", type=click.IntRange(*WORKERS_RANGE), show_default=True)
@_setting("database_pool_size", type=click.IntRange(*POOL_SIZE_RANGE), show_default=True)
@_setting("backup_repository")
@click.pass_context
def main(
    ctx: click.Context,
    database: str | None,
    public_origin: str,
    listen: str,
    allow_insecure_loopback: bool,
    canary_principals: str,
    agent_task_weekly_budget: int,
    trusted_proxy_header: str | None,
    workers: int,
    database_pool_size: int,
    backup_repository: str | None,
) -> None:
    """The agentc coordinator service."""
    ctx.obj = {
        "database": database,
        "public_origin": public_origin,
        "listen": listen,
        "allow_insecure_loopback": allow_insecure_loopback,
        "canary_principals": frozenset(
            p.strip() for p in canary_principals.split(",") if p.strip()
        ),
        "agent_task_weekly_budget": agent_task_weekly_budget,
        "trusted_proxy_header": trusted_proxy_header or None,
        "workers": workers,
        "database_pool_size": database_pool_size,
        "backup_repository": backup_repository or None,
    }


@main.command("migrate")
@click.pass_context
def migrate_cmd(ctx: click.Context) -> None:
    """Create or upgrade the schema (also done by serve)."""
    settings = _settings(ctx)

    def run() -> None:
        with _database(settings, create=True):
            click.echo(f"database {Database.parse(settings.database).redacted()} is migrated")

    _guard(run)


def _password_options(username_help: str, password_help: str) -> Callable[[F], F]:
    """``--username`` and ``--password-stdin``: the options of a host command that sets a
    person's password, which it reads with :func:`_read_password`."""

    def decorate(fn: F) -> F:
        fn = click.option("--password-stdin", is_flag=True, help=password_help)(fn)
        return click.option("--username", required=True, help=username_help)(fn)

    return decorate


def _read_password(password_stdin: bool) -> str:
    """The password from standard input (``--password-stdin``) or a hidden prompt, checked
    against the password policy before any database is opened."""
    from agentc.service.auth import check_password_policy

    if password_stdin:
        line = sys.stdin.readline()
        password = line.rstrip("\n").rstrip("\r")
        if not password:
            raise ConfigError("--password-stdin: no password on standard input")
    elif not sys.stdin.isatty():
        raise ConfigError("no terminal for the hidden password prompt; use --password-stdin")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    check_password_policy(password)
    return password


@main.command("init-admin")
@_password_options("The first administrator's name.", "Read the password from standard input.")
@click.pass_context
def init_admin(ctx: click.Context, username: str, password_stdin: bool) -> None:
    """Create the first administrator; only on an empty installation."""
    from agentc.service.work.accounts import create_admin

    settings = _settings(ctx)
    if not is_name(username):
        _fail(f"--username: {NAME_RULE}")

    def run() -> None:
        password = _read_password(password_stdin)
        _write_once(
            settings, lambda tx: create_admin(tx.conn, tx.now, username, password), create=True
        )
        click.echo(f"created admin {username}")

    _guard(run)


@main.command("issue-credential")
@click.option("--agent", "agent", required=True, help="The agent's name (created if new).")
@click.option(
    "--class",
    "credential_class",
    default="interactive",
    show_default=True,
    type=click.Choice(["interactive", "supervised", "integrator"]),
)
@click.option("--access", default="write", show_default=True, type=click.Choice(["write", "read"]))
@click.option(
    "--project",
    "projects",
    multiple=True,
    help="A project (id or name) to grant the agent; repeat for more. An agent reaches only "
    "the projects granted to it.",
)
@click.pass_context
def issue_credential(
    ctx: click.Context, agent: str, credential_class: str, access: str, projects: tuple[str, ...]
) -> None:
    """Issue an agent token from the host (printed once on standard output)."""
    settings = _settings(ctx)
    if not is_name(agent):
        _fail(f"--agent: {NAME_RULE}")

    def run() -> None:
        from agentc.service.work.accounts import issue_from_host

        data = _write_once(
            settings,
            lambda tx: issue_from_host(tx.conn, tx.now, agent, credential_class, access, projects),
        )
        granted = ", ".join(data["projects"]) or "none yet (grant them as an admin)"
        click.echo(
            f"issued {credential_class}/{access} credential {data['credential_id']} "
            f"for agent {agent} (projects: {granted}); the token is shown once:",
            err=True,
        )
        click.echo(data["token"])

    _guard(run)


@main.command("recover-operator-password")
@_password_options(
    "The person whose password is reset.", "Read the new password from standard input."
)
@click.pass_context
def recover_operator_password(ctx: click.Context, username: str, password_stdin: bool) -> None:
    """Set a person's password from the host; every browser session of theirs ends (audited)."""
    from agentc.service.auth import hash_password
    from agentc.service.work.accounts import recover_password

    settings = _settings(ctx)

    def run() -> None:
        password_hash = hash_password(_read_password(password_stdin))
        _write_once(settings, lambda tx: recover_password(tx.conn, tx.now, username, password_hash))
        click.echo(f"reset the password of {username}; their sessions have ended")

    _guard(run)


@main.command("designate-digest-sender")
@click.option("--project", "project_id", required=True, help="The project's id.")
@click.option("--agent", "agent", default=None, help="The agent that sends the project's digest.")
@click.option("--clear", is_flag=True, help="The project has no digest sender any more.")
@click.pass_context
def designate_digest_sender(
    ctx: click.Context, project_id: str, agent: str | None, clear: bool
) -> None:
    """Record which agent sends a project's attention digest (audited)."""
    from agentc.service.work.attention import designate_sender

    settings = _settings(ctx)
    if (agent is None) == (not clear):
        _fail("give exactly one of --agent NAME and --clear")

    def run() -> None:
        done = _write_once(
            settings, lambda tx: designate_sender(tx.conn, tx.now, project_id, agent)
        )
        click.echo(done)

    _guard(run)


def _warn_shared(settings: ServerSettings) -> None:
    if settings.shared_origin:
        click.echo(f"agentc coordinator: warning: {settings.shared_origin_warning}", err=True)


def _serve(settings: ServerSettings, banner: Callable[[], None] | None = None) -> None:
    import uvicorn

    from agentc.service.app import create_app
    from agentc.service.serving import settle_heap, uvicorn_config

    host, port = parse_listen(settings.listen)
    settings.check_serving()
    if settings.workers > 1:
        _serve_workers(settings, host, port, banner)
        return
    with _database(settings, create=True) as ex:
        app = create_app(settings, executor=ex)
        if banner:
            banner()
        click.echo(
            f"agentc coordinator listening on http://{host}:{port} "
            f"(public origin {settings.public_origin})",
            err=True,
        )
        _warn_shared(settings)
        settle_heap()
        uvicorn.Server(uvicorn_config(app, host, port)).run()


def _serve_workers(
    settings: ServerSettings, host: str, port: int, banner: Callable[[], None] | None
) -> None:
    """Migrate once, bind once, then fork the workers (see agentc.service.workers)."""
    import socket

    import uvicorn

    from agentc.service.app import create_app
    from agentc.service.serving import settle_heap, uvicorn_config
    from agentc.service.workers import bind, serve_forked

    with _database(settings, create=True):
        pass  # migrated; the master keeps no connection across the fork
    sock = bind(host, port)

    def worker(listening: socket.socket) -> None:
        app = create_app(settings)  # its own engine, pool and executor
        settle_heap()
        uvicorn.Server(uvicorn_config(app, host, port)).run(sockets=[listening])

    if banner:
        banner()
    click.echo(
        f"agentc coordinator listening on http://{host}:{port} "
        f"(public origin {settings.public_origin}; {settings.workers} worker processes, "
        f"master pid {os.getpid()})",
        err=True,
    )
    _warn_shared(settings)
    settle_heap()  # before the fork: the workers share these pages
    sys.exit(
        serve_forked(
            settings.workers,
            sock,
            worker,
            lambda text: click.echo(f"agentc coordinator: {text}", err=True),
        )
    )


@main.command("serve")
@click.option(
    "--workers",
    "serve_workers",
    type=click.IntRange(*WORKERS_RANGE),
    default=None,
    help="The global --workers, given after serve (it wins over COORDINATOR_WORKERS).",
)
@click.pass_context
def serve(ctx: click.Context, serve_workers: int | None) -> None:
    """Migrate, then serve the API on the loopback listen address."""
    settings = _settings(ctx, **({} if serve_workers is None else {"workers": serve_workers}))
    _guard(lambda: _serve(settings))


# The record `agentc up` keeps in the state directory it owns (agentc.up.layout.Layout.record):
# `agentc up` owns `.agentc` and refuses a directory it did not make; this command refuses one
# `agentc up` made, so one directory never has two writers.
UP_RECORD = "up.json"


@main.command("up")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".agentc-coordinator"),
    show_default=True,
)
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.pass_context
def up(ctx: click.Context, state_dir: Path, port: int) -> None:
    """Personal quick start: SQLite in STATE_DIR, loopback http, a first admin, the URL."""
    from agentc.service.work.accounts import create_admin, end_all_browser_sessions

    def run() -> None:
        if (state_dir / UP_RECORD).exists():
            raise ConfigError(
                f"--state-dir {state_dir}: this is `agentc up`'s state directory (it holds "
                f"{UP_RECORD}): run `agentc up --state-dir {state_dir}`, or give this command "
                "a directory of its own"
            )
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        origin = _console_origin(state_dir / "console-origin", port)
        settings = _settings(
            ctx,
            database=str(state_dir / "coordinator.sqlite3"),
            public_origin=origin,
            listen=f"127.0.0.1:{port}",
            allow_insecure_loopback=True,
        )
        secret_file = state_dir / "admin-password"
        with _database(settings, create=True) as ex:
            empty = (
                ex.read(
                    lambda tx: tx.conn.exec_driver_sql(
                        "SELECT count(*) FROM principals"
                    ).scalar_one()
                )
                == 0
            )
            if empty:
                password = secrets.token_urlsafe(18)
                ex.write(lambda tx: create_admin(tx.conn, tx.now, "admin", password))
                fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(password + "\n")
            # A cookie a program collected while the port was free is no session any more.
            ex.write(lambda tx: end_all_browser_sessions(tx.conn, tx.now, "up"))

        def banner() -> None:
            click.echo(f"agentc coordinator: {origin}")
            click.echo(f"  database: {settings.database}")
            if secret_file.exists():
                click.echo(f"  admin user: admin, password in {secret_file} (mode 0600)")
            click.echo(
                f"  issue an agent token: {Path(sys.argv[0]).absolute()} --database "
                f"{settings.database} issue-credential --agent NAME --project PROJECT"
            )
            sys.stdout.flush()

        _serve(settings, banner)

    _guard(run)


def _console_origin(path: Path, port: int) -> str:
    """The console's own name, kept in path (0600): the same while the port is, else new."""
    from agentc.core.addresses import local_console_origin
    from agentc.files import read_private, write_atomic

    kept = read_private(path, max_bytes=512).decode().strip() if path.exists() else None
    origin = local_console_origin(kept, port)
    if origin != kept:
        write_atomic(path, (origin + "\n").encode(), mode=0o600)
    return origin


@main.command("end-browser-sessions")
@click.pass_context
def end_browser_sessions(ctx: click.Context) -> None:
    """End every browser session: everyone signs in again (audited). `agentc up` runs it each
    time it starts."""
    from agentc.service.work.accounts import end_all_browser_sessions

    settings = _settings(ctx)

    def run() -> None:
        ended = _write_once(settings, lambda tx: end_all_browser_sessions(tx.conn, tx.now, "host"))
        click.echo(f"ended {ended} browser session(s)")

    _guard(run)


def _register_operations() -> None:
    from agentc.service import operations_cli

    operations_cli.register(main, _settings, _guard)


_register_operations()

if __name__ == "__main__":  # python -m agentc.service.cli
    main()
