"""A real coordinator in a subprocess (`agent-coordinator-server serve` under uvicorn)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from agentc.core.addresses import new_local_console_origin
from tests.kit.pg import free_port

SERVER = str(Path(sys.executable).with_name("agent-coordinator-server"))
ADMIN_PASSWORD = "correct horse battery staple"


def children(pid: int) -> set[int]:
    """The process's child processes (a `serve --workers N` master's are its workers)."""
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


@dataclass
class LiveServer:
    url: str  # where programs reach it (loopback)
    database: str
    process: subprocess.Popen[bytes]
    log: Path
    console: str = ""  # its public origin, where people sign in (the url unless it has a name)

    def __post_init__(self) -> None:
        self.console = self.console or self.url

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                SERVER,
                "--database",
                self.database,
                "--public-origin",
                self.url,
                "--allow-insecure-loopback",
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def issue_token(
        self,
        agent: str,
        *projects: str,
        credential_class: str = "interactive",
        access: str = "write",
    ) -> str:
        """A credential issued on the host (the server CLI), granted the projects."""
        granted = [arg for p in projects for arg in ("--project", p)]
        out = self.cli(
            "issue-credential",
            "--agent",
            agent,
            "--class",
            credential_class,
            "--access",
            access,
            *granted,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def admin_client(self) -> httpx.Client:
        """A signed-in admin: cookie plus the CSRF and Origin headers browser writes need."""
        return admin_at(self.url, self.console, ADMIN_PASSWORD)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def admin_at(url: str, console: str, password: str) -> httpx.Client:
    """The admin signed in at the console's origin, reached at url (loopback): the console's
    name, when it has its own, goes in Host (as a browser reaches a .localhost name). The
    client carries the cookie, the Origin and the CSRF token a person's writes need."""
    client = httpx.Client(base_url=url, timeout=30)
    if console != url:
        client.headers["Host"] = urlsplit(console).netloc
    resp = client.post(
        "/api/v1/auth/login",
        json={"username": "admin", "password": password},
        headers={"Origin": console},
    )
    resp.raise_for_status()
    client.headers.update({"Origin": console, "X-CSRF-Token": resp.json()["data"]["csrf_token"]})
    return client


def start_server(
    database: str, workdir: Path, *extra: str, port: int | None = None, named: bool = False
) -> LiveServer:
    """`named`: the console at a name of its own (``http://agentc-<random>.localhost:PORT``,
    as `agentc up` serves it), programs still on ``127.0.0.1:PORT``."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    console = new_local_console_origin(port) if named else url
    base = [
        SERVER,
        "--database",
        database,
        "--public-origin",
        console,
        "--allow-insecure-loopback",
        "--listen",
        f"127.0.0.1:{port}",
        *extra,
    ]
    init = subprocess.run(
        [*base, "init-admin", "--username", "admin", "--password-stdin"],
        input=ADMIN_PASSWORD + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    if init.returncode != 0 and "empty installation" not in init.stderr:
        raise RuntimeError(init.stderr)
    log = workdir / f"server-{port}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [*base, "serve"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    server = LiveServer(url, database, proc, log, console)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"the server did not start: {log.read_text()}")
        time.sleep(0.1)


@contextmanager
def live_server(
    database: str, workdir: Path, *extra: str, port: int | None = None, named: bool = False
) -> Iterator[LiveServer]:
    server = start_server(database, workdir, *extra, port=port, named=named)
    try:
        yield server
    finally:
        server.stop()
