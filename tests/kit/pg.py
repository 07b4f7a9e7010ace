"""A throwaway PostgreSQL server for the test session (real postgres, loopback only)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed; scripts/setup --dev installs the "
            "postgresql package"
        )
    return found[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class PgServer:
    root: Path
    port: int
    user: str = "agentc"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _as_postgres() -> list[str]:
    # postgres refuses to run as root: run the server as the postgres system account.
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
    return ["runuser", "-u", "postgres", "--"]


def start() -> PgServer:
    root = Path(tempfile.mkdtemp(prefix="agentc-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    prefix = _as_postgres()
    if prefix:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    subprocess.run(
        [
            *prefix,
            _bin("initdb"),
            "-D",
            str(data),
            "-U",
            "agentc",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    subprocess.run(
        [
            *prefix,
            _bin("pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(root / "log"),
            "-w",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c max_connections=300 "
            "-c shared_buffers=128MB",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    server = PgServer(root, port)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return server


def halt(server: PgServer) -> None:
    """Stop the server abruptly (every connection is cut), keeping its data for :func:`resume`."""
    data = str(server.root / "data")
    subprocess.run(
        [*_as_postgres(), _bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"],
        check=True, capture_output=True,
    )  # fmt: skip


def resume(server: PgServer) -> None:
    """Start a halted server again on its port, and wait until it takes connections."""
    import psycopg

    options = (
        f"-c listen_addresses=127.0.0.1 -p {server.port} -k {server.root / 'sock'} "
        "-c max_connections=300 -c shared_buffers=128MB"
    )
    data, log = str(server.root / "data"), str(server.root / "log")
    subprocess.run(
        [*_as_postgres(), _bin("pg_ctl"), "-D", data, "-l", log, "-w", "-o", options, "start"],
        check=True, capture_output=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            with psycopg.connect(server.url(), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def stop(server: PgServer) -> None:
    subprocess.run(
        [
            *_as_postgres(),
            _bin("pg_ctl"),
            "-D",
            str(server.root / "data"),
            "-m",
            "immediate",
            "stop",
        ],
        capture_output=True,
    )
    shutil.rmtree(server.root, ignore_errors=True)
