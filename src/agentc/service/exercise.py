"""The recovery exercise: backup, restore into a scratch location, the service started on it,
a scripted set of reads and writes over HTTP, each step timed against the one-hour target.

The scratch service is this release's `serve` on a free loopback port; the exercise's agent is
issued on the scratch database only (its token never reaches the live one). The result is
recorded in the repository's ``exercise.json`` for `backup-status`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import httpx

from agentc.core.errors import ConfigError
from agentc.service import backup, restore
from agentc.store.engine import Database, open_engine
from agentc.store.tx import Executor

TARGET_SECONDS = 3600.0


class Steps:
    """Each step's seconds, in order."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.start = time.monotonic()

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        began = time.monotonic()
        result = fn()
        self.seconds[name] = round(time.monotonic() - began, 3)
        return result

    def total(self) -> float:
        return round(time.monotonic() - self.start, 3)


def scratch_database(scratch: Path, scratch_database: str | None, live: Database) -> Database:
    """Where the exercise restores: a new SQLite file in an empty scratch folder, or the given
    empty PostgreSQL database."""
    if live.is_sqlite:
        if scratch_database is not None:
            raise ConfigError("--scratch-database is for PostgreSQL; SQLite restores in --scratch")
        scratch = scratch.expanduser().absolute()
        if scratch.exists() and any(scratch.iterdir()):
            raise ConfigError(f"--scratch: {scratch} is not empty")
        scratch.mkdir(mode=0o700, exist_ok=True)
        return Database.parse(str(scratch / "coordinator.sqlite3"))
    if scratch_database is None:
        raise ConfigError("--scratch-database: an empty PostgreSQL database to restore into")
    found = Database.parse(scratch_database)
    if found.is_sqlite or found.url == live.url or _identity(found) == _identity(live):
        raise ConfigError("--scratch-database: another PostgreSQL database than --database")
    return found


def _identity(database: Database) -> tuple[object, ...]:
    """Which database a PostgreSQL URL reaches, whatever its spelling (``localhost`` or
    ``127.0.0.1``, a socket, other parameters): the server's start time and the name."""
    engine = open_engine(database, create=False, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            row = conn.exec_driver_sql(
                "SELECT pg_postmaster_start_time(), current_database()"
            ).one()
        return tuple(row)
    finally:
        engine.dispose()


def run_exercise(
    live: Database, repository: Path, target: Database, *, keep: bool = False
) -> dict[str, Any]:
    """Run the exercise; the scratch copy (it holds credential verifiers) is removed
    afterwards unless keep, and only once the restore wrote it."""
    steps = Steps()
    entry = steps.run("backup", lambda: backup.backup(live, repository))
    wrote = False  # a refused restore wrote nothing: then nothing of the target is removed
    try:
        steps.run("restore", lambda: restore.restore(target, repository, entry.id))
        wrote = True
        token = _issue(target)
        server = _Server(target)
        try:
            steps.run("start", server.start)
            checked = steps.run("reads_and_writes", lambda: script(server.url, token))
        finally:
            server.stop()
    finally:
        if wrote and not keep:
            _remove_scratch(target)
    total = steps.total()
    result = {
        "snapshot": entry.id,
        "backend": entry.backend,
        "at": backup.now_ms(),
        "steps_seconds": steps.seconds,
        "total_seconds": total,
        "target_seconds": TARGET_SECONDS,
        "within_target": total <= TARGET_SECONDS,
        "checked": checked,
    }
    backup.write_json(repository / "exercise.json", result)
    return result


def _issue(target: Database) -> str:
    from agentc.service.work.accounts import issue_from_host

    executor = Executor(open_engine(target, create=False, pool_size=2, max_overflow=0))
    try:
        name = f"recovery-exercise-{secrets.token_hex(3)}"
        data = executor.write(
            lambda tx: issue_from_host(tx.conn, tx.now, name, "interactive", "write", ())
        )
        return str(data["token"])
    finally:
        executor.close()


class _Server:
    """This release's `serve` on the restored database, on a free loopback port."""

    def __init__(self, target: Database) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        # In the environment, not on the command line, where other users could read a password.
        self.database = str(target.sqlite_path) if target.is_sqlite else target.url
        self.args = [sys.executable, "-m", "agentc.service.cli"]
        self.args += ["--public-origin", self.url, "--allow-insecure-loopback"]
        self.args += ["--listen", f"127.0.0.1:{port}", "serve"]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
        env["COORDINATOR_DATABASE"] = self.database
        # Its output goes to a file: a pipe nobody drains would stop a server that logs much.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (stop closes it)
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                err = self.log.read()[-65536:].decode(errors="replace")
                tail = (err.strip().splitlines() or ["(no output)"])[-1]
                raise ConfigError(f"the service did not start on the restored database: {tail}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise ConfigError("the service on the restored database did not answer within 120 s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._close_log()
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None


def script(url: str, token: str) -> list[str]:
    """The scripted reads and writes: open an agent session, read it, list the projects,
    close it; each answer checked. Returns what was checked."""
    proof = secrets.token_urlsafe(32)
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=30, headers=auth) as client:
        opened = _ok(
            client.post(
                "/api/v1/sessions",
                json={"harness": "recovery-exercise"},
                headers={
                    "Idempotency-Key": secrets.token_hex(8),
                    "X-Coordinator-Session-Proof": proof,
                },
            )
        )
        session = {
            "X-Coordinator-Session": opened["session_id"],
            "X-Coordinator-Session-Proof": proof,
        }
        _ok(client.get(f"/api/v1/sessions/{opened['session_id']}", headers=session))
        _ok(client.get("/api/v1/projects", headers=session))
        key = {"Idempotency-Key": secrets.token_hex(8), **session}
        _ok(client.post(f"/api/v1/sessions/{opened['session_id']}/close", headers=key))
    return ["open session (write)", "read session", "list projects", "close session (write)"]


def _ok(resp: httpx.Response) -> dict[str, Any]:
    if resp.status_code >= 300:
        raise ConfigError(
            f"the restored service answered {resp.request.method} {resp.request.url.path} with "
            f"{resp.status_code}: {resp.text[:200]}"
        )
    data: dict[str, Any] = resp.json()["data"]
    return data


def _remove_scratch(target: Database) -> None:
    if target.is_sqlite:
        shutil.rmtree(target.sqlite_path.parent, ignore_errors=True)
        return
    restore.empty_postgres(target)
