"""`agent-coordinator-server` commands for running the coordinator: backup, backup-verify,
backup-status, backup-copy, restore, recovery-exercise, recover-clock, maintenance (registered by
`agentc.service.cli`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from agentc.core.errors import ConfigError
from agentc.service.backup import MAX_AGE_HOURS
from agentc.store.engine import Database

T = TypeVar("T")
Settings = Callable[..., Any]
Guard = Callable[[Callable[[], Any]], Any]

REPOSITORY = click.option(
    "--repository",
    type=click.Path(file_okay=False, path_type=Path),
    help="The backup repository: a private folder (0700) of verified snapshots (default: the "
    "global --backup-repository, COORDINATOR_BACKUP_REPOSITORY).",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _repository(ctx: click.Context, given: Path | None, *, create: bool) -> Path:
    """--repository, else the installation's backup repository setting (the one the console
    reads), opened and checked private."""
    from agentc.service import backup

    configured = ctx.obj.get("backup_repository") if ctx.obj else None
    if given is None and not configured:
        raise ConfigError(
            "--repository (or the global --backup-repository, COORDINATOR_BACKUP_REPOSITORY) "
            "is required: the backup repository's folder"
        )
    return backup.open_repository(given or Path(str(configured)), create=create)


def _echo(value: dict[str, Any], as_json: bool, text: str) -> None:
    click.echo(json.dumps(value, indent=1, sort_keys=True) if as_json else text)


def register(main: click.Group, settings_of: Settings, guard: Guard) -> None:
    """Add the commands to the server's command group (``settings_of(ctx)`` and ``guard``
    are the group's settings reader and error renderer)."""

    @main.command("backup")
    @REPOSITORY
    @click.option("--keep-hourly", type=click.IntRange(1, 10_000), default=24, show_default=True)
    @click.option("--keep-daily", type=click.IntRange(0, 10_000), default=30, show_default=True)
    @click.option("--keep-weekly", type=click.IntRange(0, 10_000), default=8, show_default=True)
    @JSON
    @click.pass_context
    def backup_cmd(
        ctx: click.Context,
        repository: Path | None,
        keep_hourly: int,
        keep_daily: int,
        keep_weekly: int,
        as_json: bool,
    ) -> None:
        """Take an online snapshot, verify it, record it, apply retention."""
        from agentc.service import backup

        settings = settings_of(ctx)

        def run() -> None:
            db = _existing(settings.database)
            repo = _repository(ctx, repository, create=True)
            entry = backup.backup(db, repo)
            removed = backup.prune(repo, keep_hourly, keep_daily, keep_weekly)
            total = sum(entry.rows.values())
            text = (
                f"snapshot {entry.id} verified: {entry.file}, {entry.size} bytes, sha256 "
                f"{entry.sha256}, migration {entry.migration}, {total} rows; retention "
                f"removed {len(removed)}"
            )
            _echo({"snapshot": entry.__dict__, "removed": removed}, as_json, text)

        guard(run)

    @main.command("backup-verify")
    @REPOSITORY
    @click.option("--snapshot", required=True, help="The snapshot's id.")
    @click.pass_context
    def backup_verify(ctx: click.Context, repository: Path | None, snapshot: str) -> None:
        """Verify a stored snapshot again: checksum, integrity, stamp, row counts."""
        from agentc.service import backup, snapshots

        def run() -> None:
            repo = _repository(ctx, repository, create=False)
            entry = backup.find(repo, snapshot)
            snapshots.check(entry.backend, entry.path(repo), entry.migration, entry.rows)
            click.echo(f"snapshot {entry.id} verifies")

        guard(run)

    @main.command("backup-status")
    @REPOSITORY
    @click.option(
        "--max-age-hours",
        type=click.FloatRange(0.01, 24 * 365),
        default=MAX_AGE_HOURS,
        show_default=True,
        help="Older than this, a snapshot or off-server copy is stale (exit status 1).",
    )
    @JSON
    @click.pass_context
    def backup_status(
        ctx: click.Context, repository: Path | None, max_age_hours: float, as_json: bool
    ) -> None:
        """The age of the newest verified snapshot and off-server copy; exit 1 when stale."""
        from agentc.service import backup

        def run() -> bool:
            repo = _repository(ctx, repository, create=False)
            found = backup.status(repo, backup.now_ms(), int(max_age_hours * backup.HOUR_MS))
            _echo(found, as_json, _status_text(found))
            return bool(found["ok"])

        if not guard(run):
            raise SystemExit(1)

    _register_restore(main, settings_of, guard)
    _register_copy(main, guard)
    _register_clock(main, settings_of, guard)
    _register_maintenance(main, settings_of, guard)


def _register_restore(main: click.Group, settings_of: Settings, guard: Guard) -> None:
    @main.command("restore")
    @REPOSITORY
    @click.option("--snapshot", required=True, help="The verified snapshot's id.")
    @JSON
    @click.pass_context
    def restore_cmd(
        ctx: click.Context, repository: Path | None, snapshot: str, as_json: bool
    ) -> None:
        """Restore a verified snapshot into --database, which must be empty; every session,
        lease and request from before the restore is void."""
        from agentc.service import restore

        settings = settings_of(ctx)

        def run() -> None:
            repo = _repository(ctx, repository, create=False)
            done = restore.restore(Database.parse(settings.database), repo, snapshot)
            text = (
                f"restored snapshot {snapshot} into {Database.parse(settings.database).redacted()}"
                f"; new authority epoch: {done['agent_sessions_closed']} agent session(s) and "
                f"{done['browser_sessions_ended']} browser session(s) of the snapshot are void"
            )
            _echo(done, as_json, text)

        guard(run)

    @main.command("recovery-exercise")
    @REPOSITORY
    @click.option(
        "--scratch",
        type=click.Path(file_okay=False, path_type=Path),
        required=True,
        help="An empty (or new) folder: the SQLite restore goes here.",
    )
    @click.option("--scratch-database", help="PostgreSQL: an empty database to restore into.")
    @click.option("--keep", is_flag=True, help="Keep the restored scratch database afterwards.")
    @JSON
    @click.pass_context
    def recovery_exercise(
        ctx: click.Context,
        repository: Path | None,
        scratch: Path,
        scratch_database: str | None,
        keep: bool,
        as_json: bool,
    ) -> None:
        """Backup, restore into scratch, start the service on it, read and write; timed."""
        from agentc.service import exercise

        settings = settings_of(ctx)

        def run() -> None:
            live = _existing(settings.database)
            repo = _repository(ctx, repository, create=True)
            target = exercise.scratch_database(scratch, scratch_database, live)
            done = exercise.run_exercise(live, repo, target, keep=keep)
            verdict = "within" if done["within_target"] else "OVER"
            steps = ", ".join(f"{k} {v:.1f} s" for k, v in done["steps_seconds"].items())
            text = (
                f"recovery exercise: {done['total_seconds']:.1f} s in all ({steps}); "
                f"{verdict} the one-hour target"
            )
            _echo(done, as_json, text)

        guard(run)


def _register_copy(main: click.Group, guard: Guard) -> None:
    @main.command("backup-copy")
    @REPOSITORY
    @click.option(
        "--destination",
        type=click.Path(file_okay=False, path_type=Path),
        required=True,
        help="A folder on other storage (a mounted remote file system), private (0700).",
    )
    @JSON
    @click.pass_context
    def backup_copy(
        ctx: click.Context, repository: Path | None, destination: Path, as_json: bool
    ) -> None:
        """Copy the newest verified snapshot off the server and verify it there."""
        from agentc.service import offsite

        def run() -> None:
            repo = _repository(ctx, repository, create=False)
            done = offsite.copy_newest(repo, destination)
            text = f"copied snapshot {done['snapshot']} to {done['destination']}; verified there"
            _echo(done, as_json, text)

        guard(run)


def _register_clock(main: click.Group, settings_of: Settings, guard: Guard) -> None:
    @main.command("recover-clock")
    @click.pass_context
    def recover_clock(ctx: click.Context) -> None:
        """Confirm that the wall clock is right: the service's high-water mark is set to it and
        paused writes resume (audited)."""
        import secrets

        from agentc.store import clock
        from agentc.store.audit import write_event
        from agentc.store.engine import migrate, open_engine
        from agentc.store.tx import wall_clock_ms

        settings = settings_of(ctx)

        def run() -> None:
            engine = open_engine(_existing(settings.database), create=False, pool_size=1)
            try:
                migrate(engine)
                with engine.begin() as conn:  # not through the executor: it would pause
                    now = wall_clock_ms()
                    before = clock.confirm(conn, now, secrets.token_hex(8))
                    data: dict[str, object] = {"previous_mark": before, "mark": now}
                    write_event(conn, now, None, None, "clock_confirmed_by_host", None, None, data)
            finally:
                engine.dispose()
            behind = 0 if before is None else max(0, before - now)
            click.echo(f"the service's clock is the wall clock again ({behind} ms set back)")

        guard(run)


def _register_maintenance(main: click.Group, settings_of: Settings, guard: Guard) -> None:
    @main.command("maintenance")
    @JSON
    @click.pass_context
    def maintenance_cmd(ctx: click.Context, as_json: bool) -> None:
        """Compact bounded payloads (old receipts' answers, old canary payloads) in small
        batches while the service runs; permanent history stays (daily timer)."""
        from agentc.service import maintenance
        from agentc.store.engine import migrate, open_engine
        from agentc.store.tx import Executor

        settings = settings_of(ctx)

        def run() -> None:
            engine = open_engine(_existing(settings.database), create=False, pool_size=2)
            migrate(engine)
            executor = Executor(engine)
            try:
                done = maintenance.compact(executor)
            finally:
                executor.close()
            text = "; ".join(
                f"{name.replace('_', ' ')}: {c.rows} rows, {c.bytes} bytes in {c.batches} "
                f"batch(es), the longest holding the writer {c.longest_hold_ms} ms"
                for name, c in done.items()
            )
            _echo({name: c.__dict__ for name, c in done.items()}, as_json, text)

        guard(run)


def _status_text(found: dict[str, Any]) -> str:
    from agentc.service import backup

    lines = []
    newest = found["newest_snapshot"]
    if newest is None:
        lines.append("snapshots: none verified")
    else:
        age = backup.age_text(found["snapshot_age_ms"])
        lines.append(f"newest verified snapshot: {newest['id']} ({age} old)")
    lines.append(f"snapshots kept: {found['snapshots']}")
    offsite = found["offsite"]
    if offsite is None:
        lines.append("off-server copy: none verified")
    else:
        age = backup.age_text(found["offsite_age_ms"])
        lines.append(
            f"newest verified off-server copy: {offsite['snapshot']} at "
            f"{offsite['destination']} ({age} old)"
        )
    exercise = found["exercise"]
    if exercise is not None:
        lines.append(
            f"last recovery exercise: {exercise['total_seconds']:.1f} s "
            f"({'within' if exercise['within_target'] else 'OVER'} the one-hour target)"
        )
    lines.extend(f"PROBLEM: {p}" for p in found["problems"])
    return "\n".join(lines)


def _existing(database: str) -> Database:
    db = Database.parse(database)
    if db.is_sqlite and not db.sqlite_path.is_file():
        raise ConfigError(f"--database: {db.sqlite_path} does not exist")
    return db
