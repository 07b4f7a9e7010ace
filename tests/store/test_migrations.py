from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from agentc.core.errors import ConfigError
from agentc.store.engine import Database, head_revision, is_migrated, migrate, open_engine
from agentc.store.migrations import HEAD
from agentc.store.schema import metadata


def test_the_head_constant_is_the_chains_head() -> None:
    """`migrate` trusts HEAD to skip Alembic on a migrated database: a new revision moves it."""
    assert head_revision() == HEAD


def test_migrations_create_exactly_the_schema(database: str) -> None:
    engine = open_engine(Database.parse(database))
    try:
        assert migrate(engine) == head_revision()
        assert is_migrated(engine)
        assert migrate(engine) == head_revision()  # idempotent
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_sqlite_settings(sqlite_database: str) -> None:
    engine = open_engine(Database.parse(sqlite_database))
    try:
        migrate(engine)
        assert oct(os.stat(sqlite_database).st_mode & 0o777) == "0o600"
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def test_a_newer_schema_is_refused(sqlite_database: str) -> None:
    engine = open_engine(Database.parse(sqlite_database))
    migrate(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(ConfigError, match="9999"):
        migrate(engine)
    engine.dispose()


def test_database_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Database.parse(str(tmp_path / "missing" / "db.sqlite3"))
    with pytest.raises(ConfigError, match="directory"):
        Database.parse(str(tmp_path))
    with pytest.raises(ConfigError, match="not supported"):
        Database.parse("mysql://x/y")
    db = Database.parse("postgresql://user:secret@127.0.0.1:5432/db")
    assert db.url.startswith("postgresql+psycopg://")
    assert "secret" not in db.redacted()


def test_0004_grants_existing_principals_every_existing_project(database: str) -> None:
    """An upgrade keeps existing deployments working: every agent and operator gets explicit
    grants of the projects that exist at the upgrade; admins need none (docs D25)."""
    from alembic import command

    from agentc.store.engine import _alembic_config

    engine = open_engine(Database.parse(database))
    try:
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), "0003")
        people = [("a1", "root", "human", "admin"), ("o1", "olga", "human", "operator")]
        agents = [("g1", "bot", "agent", "agent")]
        with engine.begin() as conn:
            for pid, name, kind, role in people + agents:
                conn.execute(
                    text(
                        "INSERT INTO principals (id, name, kind, role, created_at) "
                        "VALUES (:id, :name, :kind, :role, 0)"
                    ),
                    {"id": pid, "name": name, "kind": kind, "role": role},
                )
            for project in ("p1", "p2"):
                conn.execute(
                    text(
                        "INSERT INTO projects VALUES (:id, :id, 'https://x/y', 'main', 'agent', "
                        "600, 0, '[]', 1, 0, 0)"
                    ),
                    {"id": project},
                )
        assert migrate(engine) == head_revision()
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT principal_id, project_id, role FROM project_grants")
            ).all()
            receipt_columns = conn.execute(text("SELECT credential_id FROM receipts")).all()
        assert sorted(tuple(r) for r in rows) == [
            ("g1", "p1", "agent"),
            ("g1", "p2", "agent"),
            ("o1", "p1", "operator"),
            ("o1", "p2", "operator"),
        ]
        assert receipt_columns == []
    finally:
        engine.dispose()


def test_0007_existing_projects_hold_agent_tasks_and_tasks_start_with_no_try(
    database: str,
) -> None:
    """An upgrade makes every existing project the safe default: agent-filed tasks wait for a
    person, a task parks after 3 fruitless attempts; existing tasks have no try counted."""
    from alembic import command

    from agentc.store.engine import _alembic_config

    engine = open_engine(Database.parse(database))
    try:
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), "0006")
            conn.execute(
                text(
                    "INSERT INTO principals (id, name, kind, role, created_at) "
                    "VALUES ('a1', 'root', 'human', 'admin', 0)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO projects VALUES ('p1', 'p1', 'https://x/y', 'main', 'agent', "
                    "600, 0, '[]', 1, 0, 0)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO tasks (id, project_id, title, description, acceptance_json, "
                    "kind, priority, lifecycle, revision, generation, ready_since, origin, "
                    "created_by, created_at, updated_at) VALUES ('t1', 'p1', 't', '', '[\"c\"]', "
                    "'code', 2, 'open', 1, 0, 0, 'human', 'a1', 0, 0)"
                )
            )
        assert migrate(engine) == head_revision()
        with engine.connect() as conn:
            project = conn.execute(
                text("SELECT admit_agent_tasks, park_after_attempts FROM projects")
            ).one()
            task = conn.execute(text("SELECT proposed_at, tries FROM tasks")).one()
        assert (bool(project[0]), project[1]) == (False, 3)
        assert tuple(task) == (None, 0)
    finally:
        engine.dispose()


def test_0009_renames_names_that_differ_only_in_case(database: str) -> None:
    """Names become unique without regard to case: of each such group the principal made first
    keeps its name, the others get the first free `<name>-N`, each renaming is an event, and
    nothing else about them changes."""
    from alembic import command

    from agentc.store.engine import _alembic_config

    engine = open_engine(Database.parse(database))
    try:
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), "0008")
        made = [  # id, name, kind, role, created_at
            ("a", "admin2", "human", "operator", 1),
            ("b", "ADMIN2", "human", "admin", 2),
            ("c", "Admin2", "agent", "agent", 2),
            ("d", "admin2-2", "human", "operator", 3),  # the first free name skips this one
            ("e", "Bot", "agent", "agent", 5),
            ("f", "bot", "agent", "agent", 4),  # made earlier: it keeps its name
            ("g", "solo", "human", "operator", 6),
        ]
        with engine.begin() as conn:
            for pid, name, kind, role, created in made:
                conn.execute(
                    text(
                        "INSERT INTO principals (id, name, kind, role, created_at, disabled_at) "
                        "VALUES (:id, :name, :kind, :role, :created, :disabled)"
                    ),
                    {"id": pid, "name": name, "kind": kind, "role": role, "created": created,
                     "disabled": 9 if pid == "b" else None},
                )  # fmt: skip
            conn.execute(
                text(
                    "INSERT INTO browser_sessions (id, principal_id, token_hash, created_at, "
                    "expires_at) VALUES ('s1', 'a', 'h', 0, 99999999999999)"
                )
            )
        assert migrate(engine) == head_revision()
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT id, name, name_key, role, disabled_at FROM principals ORDER BY id")
            ).all()
            events = conn.execute(
                text(
                    "SELECT record_id, data_json FROM events WHERE kind = 'principal_renamed' "
                    "ORDER BY record_id"
                )
            ).all()
            origin = conn.execute(text("SELECT origin FROM browser_sessions")).scalar_one()
        assert [tuple(r) for r in rows] == [
            ("a", "admin2", "admin2", "operator", None),
            ("b", "ADMIN2-3", "admin2-3", "admin", 9),
            ("c", "Admin2-4", "admin2-4", "agent", None),
            ("d", "admin2-2", "admin2-2", "operator", None),
            ("e", "Bot-2", "bot-2", "agent", None),
            ("f", "bot", "bot", "agent", None),
            ("g", "solo", "solo", "operator", None),
        ]
        assert [(r[0], json.loads(r[1])["to"]) for r in events] == [
            ("b", "ADMIN2-3"),
            ("c", "Admin2-4"),
            ("e", "Bot-2"),
        ]
        assert origin is None  # an older session is good nowhere: its person signs in again
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO principals (id, name, kind, role, created_at, name_key) "
                    "VALUES ('x', 'SOLO', 'human', 'operator', 7, 'solo')"
                )
            )
    finally:
        engine.dispose()


def test_0012_cost_rows_are_indexed_by_the_attempt_they_name(database: str) -> None:
    """Existing cost rows get their JSON's attempt; a row naming none (or not as a string), and
    every canary row, get none."""
    from alembic import command

    from agentc.store.engine import _alembic_config

    engine = open_engine(Database.parse(database))
    rows = [  # stream, identity, row_json
        ("cost", "i1", json.dumps({"attempt_id": "att-1", "session_id": "l1"})),
        ("cost", "i2", json.dumps({"session_id": "l2"})),
        ("cost", "i3", json.dumps({"attempt_id": 7, "session_id": "l3"})),
        ("canary", "i4", json.dumps({"attempt_id": "att-1", "harness": "x"})),
    ]
    try:
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), "0011")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO projects (id, name, repository_url, target_branch, "
                    "review_mode, lease_seconds, max_attempt_seconds, required_checks_json, "
                    "policy_revision, created_at, updated_at) VALUES ('p1', 'p1', "
                    "'https://x/y', 'main', 'agent', 600, 0, '[]', 1, 0, 0)"
                )
            )
            for stream, identity, row in rows:
                conn.execute(
                    text(
                        "INSERT INTO telemetry_rows VALUES ('p1', :stream, 'h', :identity, "
                        ":row, 0, 'a1')"
                    ),
                    {"stream": stream, "identity": identity, "row": row},
                )
        assert migrate(engine) == head_revision()
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT identity, attempt_id FROM telemetry_rows ORDER BY identity")
            ).all()
            fix_rounds = conn.execute(text("SELECT fix_rounds FROM projects")).scalar_one()
        assert [tuple(r) for r in found] == [
            ("i1", "att-1"), ("i2", None), ("i3", None), ("i4", None)
        ]  # fmt: skip
        assert fix_rounds == 2  # an existing project gets the default fix rounds
    finally:
        engine.dispose()
