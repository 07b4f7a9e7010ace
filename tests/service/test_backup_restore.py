"""Backups, restore and the recovery exercise through the real server CLI, on both backends:
online snapshots verified while the service writes, private files, retention, refusals, and a
restore that voids the authority of everything made before it (a real agent mid-attempt)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from agentc.service.backup import ORPHAN_SECONDS, Entry, keep, orphans, prune
from agentc.store.engine import Database, open_engine
from tests.client.kit import admin_project, issue_token, workspace
from tests.kit import pg
from tests.kit.live import LiveServer, live_server

HOUR = 3_600_000


def _scratch_database(live: LiveServer, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of the live one's backend."""
    if not live.database.startswith("postgresql"):
        return str(tmp_path / "restored.sqlite3")
    server: pg.PgServer = request.getfixturevalue("pg_server")
    return server.create_database(f"r_{uuid.uuid4().hex[:10]}")


def _tables(url: str) -> int:
    """How many tables the PostgreSQL database at ``url`` holds."""
    from agentc.store.engine import Database, open_engine

    engine = open_engine(Database.parse(url), create=False, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            sql = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            return int(conn.exec_driver_sql(sql).scalar_one())
    finally:
        engine.dispose()


def _backup(live: LiveServer, repo: Path) -> dict[str, object]:
    out = live.cli("backup", "--repository", str(repo), "--json")
    assert out.returncode == 0, out.stderr
    snapshot: dict[str, object] = json.loads(out.stdout)["snapshot"]
    return snapshot


def test_backup_while_writing_is_private_verified_and_reported(
    live: LiveServer, tmp_path: Path
) -> None:
    admin = live.admin_client()
    pid = admin_project(admin)
    stop = threading.Event()
    made = []

    def write() -> None:  # the service keeps writing while the snapshots are taken
        while not stop.is_set():
            resp = admin.post(
                f"/api/v1/projects/{pid}/tasks",
                json={"title": "t", "acceptance_criteria": ["a"]},
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )
            assert resp.status_code == 201, resp.text
            made.append(1)

    writer = threading.Thread(target=write)
    writer.start()
    repo = tmp_path / "backups"
    try:
        snaps = [_backup(live, repo) for _ in range(3)]
    finally:
        stop.set()
        writer.join()
    admin.close()
    assert made and all(s["rows"]["tasks"] <= len(made) for s in snaps)  # type: ignore[index]
    assert stat.S_IMODE(repo.stat().st_mode) == 0o700
    for path in repo.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    snap = snaps[-1]
    assert (repo / str(snap["file"])).stat().st_size == snap["size"]
    verified = live.cli("backup-verify", "--repository", str(repo), "--snapshot", str(snap["id"]))
    assert verified.returncode == 0, verified.stderr

    status = live.cli("backup-status", "--repository", str(repo), "--json")
    assert status.returncode == 1  # no off-server copy yet
    found = json.loads(status.stdout)
    # Retention keeps one snapshot per hour: the three were taken in the same hour or two.
    assert found["newest_snapshot"]["id"] == snap["id"] and found["snapshots"] in (1, 2)
    assert not (repo / str(snaps[0]["file"])).exists() or found["snapshots"] == 2
    assert found["host_loss_protection"] is False
    assert any("no host-loss protection" in p for p in found["problems"])


def test_a_damaged_snapshot_or_an_open_repository_is_refused(
    live: LiveServer, tmp_path: Path
) -> None:
    repo = tmp_path / "backups"
    snap = _backup(live, repo)
    path = repo / str(snap["file"])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    out = live.cli("backup-verify", "--repository", str(repo), "--snapshot", str(snap["id"]))
    assert out.returncode == 2 and "checksum is not the manifest's" in out.stderr
    target = tmp_path / "never.sqlite3"
    restored = live.cli(
        "--database",
        str(target),
        "restore",
        "--repository",
        str(repo),
        "--snapshot",
        str(snap["id"]),
    )
    assert restored.returncode == 2 and not target.exists()
    repo.chmod(0o755)
    out = live.cli("backup", "--repository", str(repo))
    assert out.returncode == 2 and "chmod 0700" in out.stderr and "Traceback" not in out.stderr


def test_a_manifest_naming_another_file_or_no_time_is_ignored(
    live: LiveServer, tmp_path: Path
) -> None:
    """The repository's JSON is read as data of a shape: an entry naming another path (prune
    would delete it) or holding a time that is no time is not an entry, and nothing crashes."""
    repo = tmp_path / "backups"
    snap = _backup(live, repo)
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    good = json.loads((repo / f"{snap['id']}.json").read_text())
    hostile = {
        "20000101T000000Z-aaaaaa": {**good, "id": "20000101T000000Z-aaaaaa", "file": str(outside)},
        "20000101T000000Z-bbbbbb": {**good, "id": "20000101T000000Z-bbbbbb", "created_at": "x"},
        "20000101T000000Z-cccccc": {**good, "id": "20000101T000000Z-cccccc", "verified_at": 1e300},
    }
    for ident, entry in hostile.items():
        (repo / f"{ident}.json").write_text(json.dumps(entry))
        os.chmod(repo / f"{ident}.json", 0o600)
    status = live.cli("backup-status", "--repository", str(repo), "--json")
    assert status.returncode == 1 and "Traceback" not in status.stderr, status.stderr  # no copy
    assert json.loads(status.stdout)["snapshots"] == 1
    pruned = live.cli(
        "backup",
        "--repository",
        str(repo),
        "--keep-hourly",
        "1",
        "--keep-daily",
        "0",
        "--keep-weekly",
        "0",
    )  # fmt: skip (retention runs)
    assert pruned.returncode == 0, pruned.stderr
    assert outside.read_text() == "keep me"


def test_restore_refuses_a_location_that_holds_a_database(live: LiveServer, tmp_path: Path) -> None:
    repo = tmp_path / "backups"
    snap = _backup(live, repo)
    out = live.cli("restore", "--repository", str(repo), "--snapshot", str(snap["id"]))
    assert out.returncode == 2, out.stderr
    assert "restore only into an empty" in out.stderr and "Traceback" not in out.stderr
    assert httpx.get(live.url + "/healthz").status_code == 200  # the live one untouched


def test_retention_keeps_the_newest_of_each_hour_day_and_week() -> None:
    def entry(n: int, at: int) -> Entry:
        return Entry(f"s{n}", "sqlite", f"s{n}.sqlite3", at, at, 1, "x", "0010", {})

    base = 1_800_000_000_000
    found = [entry(n, base + n * HOUR // 2) for n in range(24 * 2 * 20)]  # 20 days, 2 an hour
    kept = keep(found, hourly=24, daily=7, weekly=2)
    newest_hours = {e.id for e in found[-48:] if int(e.id[1:]) % 2 == 1}
    assert newest_hours <= kept
    assert not {e.id for e in found[-48:]} - newest_hours & kept  # one per hour
    assert len(kept) <= 24 + 7 + 2
    assert found[-1].id in kept and found[0].id not in kept


def test_restore_voids_every_session_lease_and_request_from_before(
    live: LiveServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A real agent mid-attempt: its next request after the restore is refused with
    request_from_previous_restore, it starts afresh, and nothing it did acts twice."""
    admin = live.admin_client()
    # No back-off: the recovery claim right after the restore is the point here.
    pid = admin_project(admin, admit_agent_tasks=True, park_after_attempts=0)
    agent = workspace(tmp_path / "agent", live.url, pid, issue_token(admin, "worker", pid))
    agent.ok("connect", "--harness", "test-harness")
    task = agent.ok(
        "tasks",
        "create",
        "--input",
        "-",
        stdin=json.dumps({"title": "work", "acceptance_criteria": ["done"]}),
    )["task"]
    attempt = agent.ok("claim", "--task", task["id"])["claim"]["attempt"]
    agent.ok("checkpoint", "--summary", "before the snapshot")
    # A session-less request whose receipt the snapshot holds.
    bare = issue_token(admin, "bare", pid)
    key = str(uuid.uuid4())
    proof = "p" * 40

    def open_bare() -> httpx.Response:
        return httpx.post(
            live.url + "/api/v1/sessions",
            json={"harness": "h"},
            headers={
                "Authorization": f"Bearer {bare}",
                "Idempotency-Key": key,
                "X-Coordinator-Session-Proof": proof,
            },
        )

    assert open_bare().status_code == 201
    repo = tmp_path / "backups"
    snap = _backup(live, repo)
    agent.ok("checkpoint", "--summary", "after the snapshot: lost with the old server")
    live.stop()

    target = _scratch_database(live, request, tmp_path)
    out = live.cli(
        "--database", target, "restore", "--repository", str(repo), "--snapshot", str(snap["id"])
    )
    assert out.returncode == 0, out.stderr
    port = int(live.url.rsplit(":", 1)[1])
    with live_server(target, tmp_path, port=port) as restored:
        refused = agent.run("checkpoint", "--summary", "next request", "--json")
        assert refused.returncode != 0
        assert "request_from_previous_restore" in refused.stdout + refused.stderr
        replayed = open_bare()
        assert replayed.status_code == 409
        assert replayed.json()["error"]["code"] == "request_from_previous_restore"
        assert admin.get(f"/api/v1/projects/{pid}/tasks").status_code == 401  # sign in again
        admin.close()

        # The agent starts afresh: a new session, a recovery claim of its task.
        agent.ok("connect", "--new", "--harness", "test-harness")
        again = agent.ok("claim", "--task", task["id"])["claim"]["attempt"]
        assert again["generation"] == attempt["generation"] + 1
        fresh = restored.admin_client()  # a person signs in again and works
        assert fresh.get(f"/api/v1/projects/{pid}/tasks").status_code == 200
        fresh.close()
    engine = open_engine(Database.parse(target), create=False)
    with engine.connect() as conn:
        summaries = [r[0] for r in conn.exec_driver_sql("SELECT summary FROM checkpoints")]
        generations = [r[0] for r in conn.exec_driver_sql("SELECT generation FROM attempts")]
    engine.dispose()
    # What the agent did after the snapshot is gone and was not done again; the new attempt
    # (a recovery claim) holds the task.
    assert summaries == ["before the snapshot"]
    assert sorted(generations) == [attempt["generation"], again["generation"]]


def test_the_recovery_exercise_runs_end_to_end(
    live: LiveServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    admin = live.admin_client()
    admin_project(admin)
    admin.close()
    repo, scratch = tmp_path / "backups", tmp_path / "scratch"
    extra = []
    if live.database.startswith("postgresql"):
        extra = ["--scratch-database", _scratch_database(live, request, tmp_path)]
    out = live.cli(
        "recovery-exercise", "--repository", str(repo), "--scratch", str(scratch), *extra, "--json"
    )
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    assert set(done["steps_seconds"]) == {"backup", "restore", "start", "reads_and_writes"}
    assert done["within_target"] is (done["total_seconds"] <= 3600)
    assert "close session (write)" in done["checked"]
    assert not scratch.exists()  # the scratch copy (credential verifiers) is removed
    status = json.loads(live.cli("backup-status", "--repository", str(repo), "--json").stdout)
    assert status["exercise"]["snapshot"] == done["snapshot"]
    if extra:  # the scratch database was emptied; one with tables is refused
        migrated = live.cli("--database", extra[1], "migrate")
        assert migrated.returncode == 0, migrated.stderr
        again = live.cli(
            "recovery-exercise", "--repository", str(repo), "--scratch", str(scratch), *extra
        )
        assert again.returncode == 2 and "restore only into an empty" in again.stderr
        assert _tables(extra[1]) > 10  # a refused restore removes nothing of the target
        # The live database under another spelling of its address is refused, and kept.
        alias = live.database.replace("127.0.0.1", "localhost")
        assert alias != live.database
        aliased = live.cli(
            "recovery-exercise",
            "--repository",
            str(repo),
            "--scratch",
            str(scratch),
            "--scratch-database",
            alias,
        )
        assert aliased.returncode == 2, aliased.stderr
        assert "another PostgreSQL database than --database" in aliased.stderr
        assert _tables(live.database) > 10
    else:
        again = live.cli("recovery-exercise", "--repository", str(repo), "--scratch", str(repo))
        assert again.returncode == 2 and "is not empty" in again.stderr


def test_an_off_server_copy_is_locked_verified_there_and_ends_the_warning(
    live: LiveServer, tmp_path: Path
) -> None:
    repo, dest = tmp_path / "backups", tmp_path / "offsite"
    _backup(live, repo)
    dest.mkdir(mode=0o700)
    lock = os.open(dest / ".copy.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another copy is running
        busy = live.cli("backup-copy", "--repository", str(repo), "--destination", str(dest))
        assert busy.returncode == 2 and "another copy" in busy.stderr
        assert not (repo / "offsite.json").exists()
    finally:
        os.close(lock)
    out = live.cli("backup-copy", "--repository", str(repo), "--destination", str(dest), "--json")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    # The destination is a repository of its own: its copy verifies there.
    verified = live.cli("backup-verify", "--repository", str(dest), "--snapshot", done["snapshot"])
    assert verified.returncode == 0, verified.stderr
    status = live.cli("backup-status", "--repository", str(repo), "--json")
    assert status.returncode == 0, status.stdout
    found = json.loads(status.stdout)
    assert found["host_loss_protection"] is True and found["problems"] == []


def test_prune_removes_what_a_killed_backup_left_and_nothing_else(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir(mode=0o700)
    old = time.time() - ORPHAN_SECONDS - 60
    names = {
        "20261201T000000Z-aaaaaa.partial": True,  # killed while dumping
        "20261201T000000Z-bbbbbb.sqlite3": True,  # crashed before its manifest entry
        "20261201T000000Z-cccccc.pgdump": False,  # its entry is beside it (malformed: kept)
        "20261201T000000Z-cccccc.json": False,
        "notes.partial": False,  # not a name backup gives
        "offsite.json": False,
    }
    for name in names:
        (repo / name).write_text("{}")
        os.utime(repo / name, (old, old))
    fresh = repo / "20261201T000000Z-dddddd.partial"  # a backup still writing
    fresh.write_text("")
    (repo / "20261201T000000Z-eeeeee.partial").mkdir()  # not a regular file
    os.utime(repo / "20261201T000000Z-eeeeee.partial", (old, old))
    expected = sorted(n for n, gone in names.items() if gone)
    assert [p.name for p in orphans(repo, time.time())] == expected
    assert sorted(prune(repo, 24, 30, 8)) == expected
    assert sorted(p.name for p in repo.iterdir()) == sorted(
        [n for n, gone in names.items() if not gone]
        + [fresh.name, "20261201T000000Z-eeeeee.partial"]
    )
