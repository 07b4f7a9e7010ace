"""A PostgreSQL dump holding a table that is not ours is refused while pg_restore still streams
it, and the refusal leaves no pg_restore running or unreaped behind."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from agentc.service import snapshots
from agentc.service.snapshots import SnapshotError
from tests.kit.pg import PgServer

pytestmark = pytest.mark.postgres


def _children(name: str) -> list[int]:
    """This process's children running (or left unreaped as) ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if comm == name and int(rest.split()[1]) == os.getpid():
            found.append(int(entry.name))
    return found


def test_a_foreign_table_is_refused_and_no_pg_restore_is_left(
    pg_server: PgServer, tmp_path: Path
) -> None:
    import psycopg

    from agentc.store.engine import Database, migrate, open_engine

    url = pg_server.create_database(f"foreign_{uuid.uuid4().hex[:8]}")
    engine = open_engine(Database(url))
    migrate(engine)
    engine.dispose()
    with psycopg.connect(url, autocommit=True) as conn:
        # First in the dump, and more than a pipe holds: pg_restore is mid-stream at the refusal.
        conn.execute("CREATE TABLE aaa_foreign (line text)")
        conn.execute(
            "INSERT INTO aaa_foreign SELECT repeat('x', 200) FROM generate_series(1, 5000)"
        )
    dump = tmp_path / "foreign.dump"
    snapshots.take(Database(url), dump)
    with pytest.raises(SnapshotError, match="holds a table aaa_foreign that is not ours"):
        snapshots.verify("postgres", dump)
    assert _children("pg_restore") == []
