"""Opening a database: SQLite (the embedded default) or PostgreSQL; migrations.

SQLite files are created with mode 0600 and opened in WAL mode with foreign keys on and
synchronous=FULL. A database that is not ours (tables we do not know, no migration stamp) is
refused, never modified.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import Connection
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

from agentc.core.errors import ConfigError
from agentc.store.migrations import HEAD

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def is_postgres_url(value: str) -> bool:
    return value.startswith(POSTGRES_SCHEMES)


@dataclass(frozen=True)
class Database:
    """Where the data lives: a SQLite path or a PostgreSQL URL."""

    url: str

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @property
    def sqlite_path(self) -> Path:
        return Path(self.url.removeprefix("sqlite:///"))

    @classmethod
    def parse(cls, value: str) -> Database:
        if is_postgres_url(value):
            rest = value.split("://", 1)[1]
            return cls("postgresql+psycopg://" + rest)
        if "://" in value:
            raise ConfigError(
                f"--database: {value.split('://')[0]}:// is not supported; give a SQLite file "
                "path or a postgresql:// URL"
            )
        path = Path(value).expanduser().absolute()
        if path.is_dir():
            raise ConfigError(f"--database: {path} is a directory; give a file path")
        if not path.parent.is_dir():
            raise ConfigError(f"--database: the folder {path.parent} does not exist")
        return cls(f"sqlite:///{path}")

    def redacted(self) -> str:
        if self.is_sqlite:
            return str(self.sqlite_path)
        scheme, rest = self.url.split("://", 1)
        return f"postgresql://{rest.rsplit('@', 1)[-1]}"


def _sqlite_connect_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
        # Autocommit at the driver level; SQLAlchemy's begin event below issues BEGIN itself,
        # so every write transaction takes the write lock up front (BEGIN IMMEDIATE).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA busy_timeout=5000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        conn.exec_driver_sql(f"BEGIN {mode}")


def create_sqlite_file(path: Path) -> None:
    """Create an empty database file readable by its owner only."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)


def open_engine(
    db: Database, *, create: bool = True, pool_size: int = 8, max_overflow: int = 4
) -> Engine:
    if db.is_sqlite:
        path = db.sqlite_path
        if not path.exists():
            if not create:
                raise ConfigError(f"--database: {path} does not exist")
            create_sqlite_file(path)
        else:
            _check_sqlite_file(path)
        engine = create_engine(
            db.url,
            poolclass=QueuePool,
            pool_size=pool_size,
            max_overflow=0,
            connect_args={"check_same_thread": False, "timeout": 5.0},
            hide_parameters=True,
        )
        _sqlite_connect_hooks(engine)
        return engine
    return create_engine(
        db.url,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=False,
        connect_args={"connect_timeout": 5},
        hide_parameters=True,
    )


def _check_sqlite_file(path: Path) -> None:
    """Look before touching: opening with our pragmas would rewrite the header (WAL)."""
    if path.stat().st_size == 0:
        return
    with path.open("rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise ConfigError(f"--database: {path} is not a SQLite database")
    try:
        probe = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in probe.execute("SELECT name FROM sqlite_master")}
        finally:
            probe.close()
    except sqlite3.Error as exc:
        raise ConfigError(f"--database: {path} cannot be read as SQLite: {exc}") from exc
    _refuse_foreign(names)


def _refuse_foreign(names: set[str]) -> None:
    names = {n for n in names if not n.startswith("sqlite_")}
    if names and "alembic_version" not in names:
        raise ConfigError(
            "the database is not an agentc coordinator database (it has tables "
            f"{', '.join(sorted(names)[:5])} and no agentc migration stamp); refusing to "
            "touch it"
        )


def _alembic_config(conn: Connection) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(MIGRATIONS))
    head = script.get_current_head()
    assert head is not None
    return head


def current_revision(conn: Connection) -> str | None:
    """The one revision the database is stamped with (None: no stamp, or not exactly one),
    read without Alembic."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    return str(rows[0][0]) if len(rows) == 1 else None


def check_ours(conn: Connection) -> None:
    """Refuse a database that holds tables but no agentc migration stamp."""
    names = set(inspect(conn).get_table_names())
    _refuse_foreign(names)
    if names:
        from alembic.script import ScriptDirectory

        rev = current_revision(conn)
        known = {r.revision for r in ScriptDirectory(str(MIGRATIONS)).walk_revisions()}
        if rev is not None and rev not in known:
            raise ConfigError(
                f"the database is at migration {rev}, which this version of agentc does not "
                "know (is it from a newer release?)"
            )


def migrate(engine: Engine) -> str:
    """Bring the schema to the newest migration; returns the revision it is at."""
    with engine.connect() as conn:
        if current_revision(conn) == HEAD:  # already there: the common case, without Alembic
            return HEAD
        check_ours(conn)
        conn.rollback()
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_alembic_config(conn), "head")
    return HEAD


def is_migrated(engine: Engine) -> bool:
    with engine.connect() as conn:
        return current_revision(conn) == HEAD


__all__ = ["Database", "check_ours", "migrate", "open_engine"]
