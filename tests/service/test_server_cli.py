"""agent-coordinator-server: bad input ends with a clear message, a non-zero exit, and the
database exactly as it was."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SERVER = str(Path(sys.executable).with_name("agent-coordinator-server"))
PASSWORD = "correct horse battery staple"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SERVER, *args], input=stdin, capture_output=True, text=True, timeout=120)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def installed(tmp_path: Path) -> str:
    """A new SQLite installation with its first admin."""
    db = str(tmp_path / "c.sqlite3")
    made = run(
        "--database", db, "init-admin", "--username", "admin", "--password-stdin",
        stdin=PASSWORD + "\n",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return db


def assert_clean_failure(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode != 0, out
    assert "Traceback" not in out.stderr, out.stderr
    for word in words:
        assert word in out.stderr, out.stderr


def test_init_admin_then_not_again(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite3"
    out = run(
        "--database",
        str(db),
        "init-admin",
        "--username",
        "admin",
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    assert out.returncode == 0, out.stderr
    assert oct(db.stat().st_mode & 0o777) == "0o600"
    before = (
        sqlite3.connect(db).execute("SELECT id, name, password_hash FROM principals").fetchall()
    )
    out = run(
        "--database",
        str(db),
        "init-admin",
        "--username",
        "other",
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    assert_clean_failure(out, "empty installation")
    after = sqlite3.connect(db).execute("SELECT id, name, password_hash FROM principals").fetchall()
    assert before == after


def test_missing_database_folder(tmp_path: Path) -> None:
    db = tmp_path / "nope" / "c.sqlite3"
    for args in (("migrate",), ("serve",), ("init-admin", "--username", "a", "--password-stdin")):
        out = run("--database", str(db), "--allow-insecure-loopback", *args, stdin=PASSWORD + "\n")
        assert_clean_failure(out, "does not exist")
    assert not db.parent.exists()


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 10])
def test_a_database_that_is_not_ours(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "other.sqlite3"
    if content:
        db.write_bytes(content)
    else:
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, secret TEXT)")
        conn.execute("INSERT INTO accounts (secret) VALUES ('keep me')")
        conn.commit()
        conn.close()
    before = digest(db)
    for args in (
        ("migrate",),
        ("serve",),
        ("issue-credential", "--agent", "x"),
        ("init-admin", "--username", "a", "--password-stdin"),
    ):
        out = run("--database", str(db), "--allow-insecure-loopback", *args, stdin=PASSWORD + "\n")
        assert_clean_failure(out, "not")
    assert digest(db) == before
    assert not Path(str(db) + "-wal").exists()


def test_listen_and_origin_rules(tmp_path: Path) -> None:
    db = str(tmp_path / "c.sqlite3")
    out = run("--database", db, "--listen", "0.0.0.0:8080", "serve")
    assert_clean_failure(out, "loopback")
    out = run("--database", db, "--listen", "192.168.1.5:8080", "serve")
    assert_clean_failure(out, "loopback")
    out = run("--database", db, "--listen", "nonsense", "serve")
    assert_clean_failure(out, "HOST:PORT")
    out = run("--database", db, "--public-origin", "http://coordinator.example.com", "serve")
    assert_clean_failure(out, "https")
    out = run("--database", db, "--public-origin", "http://127.0.0.1:8080", "serve")
    assert_clean_failure(out, "--allow-insecure-loopback")
    out = run("--database", db, "--public-origin", "https://x.example/path", "serve")
    assert_clean_failure(out, "origin")
    assert not Path(db).exists()


def test_password_rules_and_no_password_argument(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite3"
    out = run(
        "--database",
        str(db),
        "init-admin",
        "--username",
        "admin",
        "--password-stdin",
        stdin="short\n",
    )
    assert_clean_failure(out, "12")
    out = run(
        "--database", str(db), "init-admin", "--username", "admin", "--password-stdin", stdin=""
    )
    assert_clean_failure(out, "no password")
    out = run("--database", str(db), "init-admin", "--username", "admin", "--password", "x" * 20)
    assert out.returncode == 2 and "No such option" in out.stderr
    out = run("--database", str(db), "init-admin", "--username", "admin")  # no terminal
    assert_clean_failure(out, "--password-stdin")
    assert not db.exists()


def test_issue_credential_prints_the_token_once(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite3"
    assert run("--database", str(db), "migrate").returncode == 0
    out = run(
        "--database", str(db), "issue-credential", "--agent", "worker", "--class", "supervised"
    )
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    assert len(token) == 64
    stored = sqlite3.connect(db).execute("SELECT token_hash FROM credentials").fetchall()
    assert stored == [(hashlib.sha256(token.encode()).hexdigest(),)]
    events = sqlite3.connect(db).execute("SELECT data_json FROM events").fetchall()
    assert token not in repr(events)
    out = run("--database", str(db), "issue-credential", "--agent", "w", "--class", "boss")
    assert out.returncode == 2 and "boss" in out.stderr


def test_issue_credential_grants_projects_by_id_or_name(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite3"
    assert run("--database", str(db), "migrate").returncode == 0
    with sqlite3.connect(db) as conn:
        for pid, name in (("p-1", "alpha"), ("p-2", "beta")):
            conn.execute(
                "INSERT INTO projects (id, name, repository_url, target_branch, review_mode, "
                "lease_seconds, max_attempt_seconds, required_checks_json, policy_revision, "
                "created_at, updated_at) "
                "VALUES (?, ?, 'https://x/y', 'main', 'agent', 600, 0, '[]', 1, 0, 0)",
                (pid, name),
            )
    out = run(
        "--database", str(db), "issue-credential", "--agent", "w", "--project", "p-1",
        "--project", "beta",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "projects: p-1, p-2" in out.stderr
    grants = sqlite3.connect(db).execute("SELECT project_id, role FROM project_grants").fetchall()
    assert sorted(grants) == [("p-1", "agent"), ("p-2", "agent")]
    out = run("--database", str(db), "issue-credential", "--agent", "v", "--project", "gamma")
    assert_clean_failure(out, "--project: no project with the id or name 'gamma'")
    named = sqlite3.connect(db).execute("SELECT name FROM principals ORDER BY name").fetchall()
    assert named == [("w",)]  # the refused one wrote nothing


def test_missing_database_and_unreachable_postgres(tmp_path: Path) -> None:
    out = run("issue-credential", "--agent", "x")
    assert_clean_failure(out, "--database")
    out = run("--database", str(tmp_path / "none.sqlite3"), "issue-credential", "--agent", "x")
    assert_clean_failure(out, "does not exist")
    out = run("--database", "postgresql://nobody@127.0.0.1:1/none", "migrate")
    assert_clean_failure(out, "database")
    out = run("--database", "mysql://x/y", "migrate")
    assert_clean_failure(out, "mysql")
    out = run("no-such-command")
    assert out.returncode == 2 and "No such command" in out.stderr


@pytest.mark.parametrize("name", ["ad min", "ädmin", "a/b", "x" * 101, ""])
def test_host_commands_refuse_the_names_the_api_refuses(tmp_path: Path, name: str) -> None:
    """One name rule (``agentc.core.rules.NAME_PATTERN``) for the API's people and agents and
    the host commands that create them; nothing is written on a refusal."""
    from pydantic import TypeAdapter, ValidationError

    from agentc.service.schemas import Name

    with pytest.raises(ValidationError):
        TypeAdapter(Name).validate_python(name)
    db = tmp_path / "c.sqlite3"
    for args in (
        ("init-admin", "--username", name, "--password-stdin"),
        ("issue-credential", "--agent", name),
    ):
        out = run("--database", str(db), *args, stdin=PASSWORD + "\n")
        assert_clean_failure(out, "ASCII letters, digits")
    assert not db.exists()


def test_a_name_the_api_takes_is_taken_by_the_host_commands(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite3"
    out = run("--database", str(db), "init-admin", "--username", "ops@example.org",
              "--password-stdin", stdin=PASSWORD + "\n")  # fmt: skip
    assert out.returncode == 0, out.stderr
    out = run("--database", str(db), "issue-credential", "--agent", "ci.bot-1")
    assert out.returncode == 0, out.stderr


_LOADED = """
import sys
from agentc.service.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    print("exit", exc.code, file=sys.stderr)
print(",".join(m for m in ("fastapi", "starlette", "alembic", "uvicorn") if m in sys.modules))
"""


def test_host_commands_on_a_migrated_database_load_neither_the_web_stack_nor_alembic(
    tmp_path: Path,
) -> None:
    """A host command starts in a fraction of the server's time: its rules come without FastAPI,
    and a database already at the newest migration is not handed to Alembic."""
    db = installed(tmp_path)
    for args, code in (
        (("issue-credential", "--agent", "bot"), "0"),
        (("designate-digest-sender", "--project", "nope", "--agent", "bot"), "2"),
        (("end-browser-sessions",), "0"),
    ):
        out = subprocess.run(
            [sys.executable, "-c", _LOADED, "--database", db, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in out.stderr and f"exit {code}" in out.stderr, out.stderr
        assert out.stdout.splitlines()[-1] == "", (args, out.stdout)


def test_a_database_error_without_a_driver_error_is_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLAlchemy's own errors (the pool's TimeoutError: every connection busy) end the host
    command with exit status 1 and one line, as the driver's errors do."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import QueuePool

    from agentc.service.cli import _guard

    engine = create_engine(
        f"sqlite:///{tmp_path / 'busy.sqlite3'}",
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=0,
        pool_timeout=0.1,
    )
    held = engine.connect()
    try:
        with pytest.raises(SystemExit) as ended:
            _guard(engine.connect)
    finally:
        held.close()
        engine.dispose()
    assert ended.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("agent-coordinator-server: no database connection came free in time")
    assert "QueuePool limit" in err and "Traceback" not in err and err.count("\n") == 1


def test_the_backup_commands_use_the_installation_s_repository_unless_told(
    tmp_path: Path,
) -> None:
    """COORDINATOR_BACKUP_REPOSITORY (the setting the console reads) is the backup commands'
    repository; --repository overrides it; with neither, a clear refusal."""
    import json
    import os

    db = installed(tmp_path)
    out = run("--database", db, "backup")
    assert_clean_failure(out, "--repository (or the global --backup-repository")
    assert out.returncode == 2
    repo = tmp_path / "backups"
    env = {**os.environ, "COORDINATOR_BACKUP_REPOSITORY": str(repo)}

    def with_env(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SERVER, "--database", db, *args], capture_output=True, text=True, env=env, timeout=120
        )

    taken = with_env("backup", "--json")
    assert taken.returncode == 0, taken.stderr
    snapshot = json.loads(taken.stdout)["snapshot"]["id"]
    found = json.loads(with_env("backup-status", "--json").stdout)
    assert found["newest_snapshot"]["id"] == snapshot
    other = with_env("backup-status", "--repository", str(tmp_path / "elsewhere"))
    assert_clean_failure(other, "elsewhere does not exist")
