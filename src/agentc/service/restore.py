"""Restore a verified snapshot into an empty location, with a new authority epoch.

The restored database is the snapshot's, migrated to this release, and then, in one
transaction: a new ``authority_epoch`` (:mod:`agentc.store.epoch`), so every agent session,
browser session and idempotency receipt of the snapshot is refused from then on
(``request_from_previous_restore``; a browser signs in again); every agent session of the
snapshot closed, so the attempts they held have lost their owner and their tasks go to a
recovery claim; the restore recorded in ``service_state['restored_from']`` and as a
``service_restored`` event. Nothing is ever restored over a database that has tables.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import inspect

from agentc.core.errors import ConfigError
from agentc.service import backup, snapshots
from agentc.store import epoch, service_state
from agentc.store.audit import write_event
from agentc.store.engine import Database, migrate, open_engine
from agentc.store.sql import run
from agentc.store.tx import Executor, Tx

SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def restore(db: Database, repository: Path, snapshot_id: str) -> dict[str, Any]:
    """Restore the snapshot into db, which must not exist (SQLite) or hold no table
    (PostgreSQL); returns what was done."""
    entry = backup.find(repository, snapshot_id)
    if entry.backend != backup.backend_of(db):
        raise ConfigError(
            f"snapshot {entry.id} is a {entry.backend} snapshot; --database is "
            f"{backup.backend_of(db)}"
        )
    snapshots.check(entry.backend, entry.path(repository), entry.migration, entry.rows)
    if db.is_sqlite:
        return _restore_sqlite(entry, entry.path(repository), db.sqlite_path)
    _load_postgres(entry.path(repository), db)
    try:
        return _migrate_and_void(db, entry)
    except BaseException:
        # The database was verified empty: nothing of the snapshot may stay there trusting
        # the sessions, leases and receipts of before (a serve on it would accept them).
        empty_postgres(db)
        raise


def _migrate_and_void(db: Database, entry: backup.Entry) -> dict[str, Any]:
    engine = open_engine(db, create=False, pool_size=2, max_overflow=0)
    migrate(engine)
    executor = Executor(engine)
    try:
        return executor.write(lambda tx: void_authority(tx, entry.id, entry.created_at))
    finally:
        executor.close()


def empty_postgres(db: Database) -> None:
    """Drop every table of db's ``public`` schema (a restore's target or a scratch copy)."""
    engine = open_engine(db, create=False, pool_size=1, max_overflow=0)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
    finally:
        engine.dispose()


def void_authority(tx: Tx, snapshot_id: str, snapshot_at: int) -> dict[str, Any]:
    """Start a new authority epoch in the restored database (see the module docstring)."""
    new = secrets.token_hex(16)
    old = epoch.current(tx.conn)
    service_state.set_state(tx.conn, epoch.KEY, new)
    closed = run(
        tx.conn, "UPDATE agent_sessions SET closed_at = :now WHERE closed_at IS NULL", now=tx.now
    )
    ended = run(
        tx.conn,
        "UPDATE browser_sessions SET revoked_at = :now WHERE revoked_at IS NULL",
        now=tx.now,
    )
    done = {
        "snapshot": snapshot_id,
        "snapshot_at": snapshot_at,
        "restored_at": tx.now,
        "epoch": new,
        "previous_epoch": old,
        "agent_sessions_closed": closed,
        "browser_sessions_ended": ended,
    }
    service_state.set_state(tx.conn, "restored_from", json.dumps(done, sort_keys=True))
    write_event(tx.conn, tx.now, None, None, "service_restored", None, None, done)
    return done


def _restore_sqlite(entry: backup.Entry, source: Path, target: Path) -> dict[str, Any]:
    """Copy the snapshot beside target, migrate it and void its authority there, and only
    then put it in place: target must not exist, and is never seen without the new epoch.
    It is linked in place exclusively, so a database that appears meanwhile is not
    overwritten either."""
    if not target.parent.is_dir():
        raise ConfigError(f"--database: the folder {target.parent} does not exist")
    for suffix in SQLITE_SUFFIXES:
        if os.path.lexists(str(target) + suffix):
            raise ConfigError(
                f"--database: {target}{suffix} exists; restore only into an empty location "
                "(a restore never overwrites a database)"
            )
    tmp = target.with_name(f".{target.name}.restoring")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        done = _migrate_and_void(Database.parse(str(tmp)), entry)
        for suffix in SQLITE_SUFFIXES[1:]:  # everything is in the main file once closed
            if os.path.lexists(str(tmp) + suffix):
                raise ConfigError(f"the restored copy {tmp} left {suffix} behind")
        with open(tmp, "rb") as written:
            os.fsync(written.fileno())
        os.link(tmp, target)  # fails if target exists now
        return done
    finally:
        for suffix in SQLITE_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(tmp) + suffix)


def _load_postgres(dump: Path, db: Database) -> None:
    engine = open_engine(db, create=False, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            tables = inspect(conn).get_table_names()
    finally:
        engine.dispose()
    if tables:
        raise ConfigError(
            f"--database: {db.redacted()} has tables ({', '.join(sorted(tables)[:3])}); "
            "restore only into an empty database (a restore never overwrites a database)"
        )
    env = snapshots.pg_env(db)
    snapshots.run_tool(
        [
            snapshots.pg_tool("pg_restore"),
            "--no-owner",
            "--no-privileges",
            "--exit-on-error",
            "--single-transaction",
            f"--dbname={env.get('PGDATABASE', '')}",
            str(dump),
        ],
        env,
    )
