"""A database snapshot, taken online and verified: one function per backend for each step.

SQLite: one read transaction counts every table's rows and copies the pages with SQLite's
online backup API from that same transaction, so the copy and the counts are of one point in
time while the service keeps writing (WAL readers do not block the writer).

PostgreSQL: a REPEATABLE READ transaction exports its snapshot, counts the rows in it and keeps
it open while `pg_dump --snapshot` dumps exactly that snapshot (custom format). The connection
settings reach pg_dump in its environment, never on its command line.

Verification opens the snapshot as it is stored: SQLite read-only and immutable (integrity
check, migration stamp, row counts); a PostgreSQL dump through `pg_restore` (its table of
contents, then every table's data streamed and counted, the migration stamp read from it).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

from agentc.core.errors import ConfigError
from agentc.store.engine import Database
from agentc.store.schema import metadata

STAMP = "alembic_version"
TABLES = (*sorted(metadata.tables), STAMP)


class SnapshotError(ConfigError):
    """A snapshot could not be taken, or does not verify."""


def checksum(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def take(db: Database, dest: Path) -> tuple[str, dict[str, int]]:
    """Write a consistent snapshot of db to dest (created 0600); returns the migration stamp
    and every table's row count at the snapshot's point."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.close(fd)
    if db.is_sqlite:
        return _take_sqlite(db.sqlite_path, dest)
    return _take_postgres(db, dest)


def verify(backend: str, path: Path) -> tuple[str, dict[str, int]]:
    """Open the stored snapshot and read it whole: its migration stamp and row counts."""
    if backend == "sqlite":
        return _verify_sqlite(path)
    return _verify_postgres(path)


def check(backend: str, path: Path, stamp: str, rows: dict[str, int]) -> None:
    """Verify the snapshot against what the source held at its point."""
    found_stamp, found_rows = verify(backend, path)
    if found_stamp != stamp:
        raise SnapshotError(f"{path.name}: migration stamp {found_stamp}, the source had {stamp}")
    differ = sorted(t for t in set(rows) | set(found_rows) if rows.get(t) != found_rows.get(t))
    if differ:
        shown = ", ".join(f"{t} {found_rows.get(t)} != {rows.get(t)}" for t in differ[:5])
        raise SnapshotError(f"{path.name}: row counts differ from the source: {shown}")


# --- SQLite ---------------------------------------------------------------------------------


def _counts(cur: Any) -> dict[str, int]:
    return {t: int(cur.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t in TABLES}


def _stamp(cur: Any) -> str:
    rows = cur.execute(f"SELECT version_num FROM {STAMP}").fetchall()
    if len(rows) != 1:
        raise SnapshotError(f"the database has {len(rows)} migration stamps, not one")
    return str(rows[0][0])


def _take_sqlite(source: Path, dest: Path) -> tuple[str, dict[str, int]]:
    src = sqlite3.connect(source, timeout=30, isolation_level=None)
    try:
        src.execute("PRAGMA busy_timeout=30000")
        src.execute("BEGIN")  # one read transaction: the counts and the pages of one point
        stamp, rows = _stamp(src), _counts(src)
        dst = sqlite3.connect(dest)
        try:
            src.backup(dst)
        finally:
            dst.close()
        src.execute("COMMIT")
    except sqlite3.Error as exc:
        raise SnapshotError(f"the SQLite snapshot failed: {exc}") from exc
    finally:
        src.close()
    # The copy keeps the source's WAL mode; a snapshot is one self-contained file.
    out = sqlite3.connect(dest, isolation_level=None)
    try:
        out.execute("PRAGMA journal_mode=DELETE")
    finally:
        out.close()
    return stamp, rows


def _verify_sqlite(path: Path) -> tuple[str, dict[str, int]]:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            result = conn.execute("PRAGMA integrity_check").fetchall()
            if result != [("ok",)]:
                raise SnapshotError(f"{path.name} fails SQLite's integrity check: {result[:3]}")
            return _stamp(conn), _counts(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise SnapshotError(f"{path.name} cannot be read as a SQLite snapshot: {exc}") from exc


# --- PostgreSQL -----------------------------------------------------------------------------


def pg_tool(name: str) -> str:
    """The newest installed PostgreSQL client program of that name (pg_dump must be at least
    the server's version)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=_version_key)
    path = found[-1] if found else shutil.which(name)
    if path is None:
        raise SnapshotError(f"{name} is not installed (the PostgreSQL client programs)")
    return path


def _version_key(path: str) -> int:
    match = re.search(r"/postgresql/(\d+)/", path)
    return int(match.group(1)) if match else 0


_LIBPQ_ENV = {
    "host": "PGHOST",
    "port": "PGPORT",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "dbname": "PGDATABASE",
    "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
}


def libpq_url(db: Database) -> str:
    return "postgresql://" + db.url.split("://", 1)[1]


def pg_env(db: Database) -> dict[str, str]:
    """The environment that points libpq programs at db (a password never goes on a command
    line, where other users could read it)."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(libpq_url(db))
    unknown = sorted(set(params) - set(_LIBPQ_ENV))
    if unknown:
        raise SnapshotError(f"--database: the parameter {unknown[0]} is not supported here")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update({_LIBPQ_ENV[k]: str(v) for k, v in params.items() if v is not None})
    return env


def run_tool(args: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise SnapshotError(f"{Path(args[0]).name} failed: {tail}")
    return done.stdout


def _take_postgres(db: Database, dest: Path) -> tuple[str, dict[str, int]]:
    import psycopg

    with psycopg.connect(libpq_url(db), connect_timeout=10) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.cursor() as cur:
            cur.execute("SELECT pg_export_snapshot()")
            row = cur.fetchone()
            assert row is not None
            stamp, rows = _stamp(cur), _counts(cur)
            run_tool(
                [
                    pg_tool("pg_dump"),
                    "--format=custom",
                    "--no-owner",
                    "--no-privileges",
                    f"--snapshot={row[0]}",
                    f"--file={dest}",
                ],
                pg_env(db),
            )
        conn.rollback()
    return stamp, rows


_COPY = re.compile(r'^COPY (?:"?public"?\.)?"?([A-Za-z0-9_]+)"? \(.*\) FROM stdin;$')


def _verify_postgres(path: Path) -> tuple[str, dict[str, int]]:
    run_tool([pg_tool("pg_restore"), "--list", str(path)])
    rows = dict.fromkeys(TABLES, 0)
    stamps: list[str] = []
    with contextlib.closing(_copied(path)) as copied:  # closed (pg_restore ended) on a raise
        for table, line in copied:
            if table not in rows:
                raise SnapshotError(f"{path.name} holds a table {table} that is not ours")
            rows[table] += 1
            if table == STAMP:
                stamps.append(line)
    if len(stamps) != 1:
        raise SnapshotError(f"{path.name} has {len(stamps)} migration stamps, not one")
    return stamps[0], rows


def _copied(path: Path) -> Generator[tuple[str, str]]:
    """Each data row of the dump with its table, streamed from `pg_restore --data-only`; a
    reader that stops early (a refused table) leaves no pg_restore behind."""
    with tempfile.TemporaryFile("w+") as errors:  # a file: pg_restore never blocks on it
        proc = subprocess.Popen(
            [pg_tool("pg_restore"), "--data-only", "--file=-", str(path)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        assert proc.stdout is not None
        read = False
        try:
            table: str | None = None
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                if table is None:
                    match = _COPY.match(line)
                    table = match.group(1) if match else None
                elif line == "\\.":
                    table = None
                else:
                    yield table, line
            read = True
        finally:
            if not read:  # the reader stopped early (or failed): pg_restore is not waited out
                proc.kill()
            status = proc.wait()
            proc.stdout.close()
        errors.seek(0)
        err = errors.read()
    if status != 0:
        tail = (err.strip().splitlines() or ["(no message)"])[-1]
        raise SnapshotError(f"{path.name} cannot be read whole by pg_restore: {tail}")
