"""The console's own name (agentc.service.hosts): browser sessions are made and good only under
it, nothing the service answers under another name tells it, and a session made at one address
is refused at another. The browser's side (cookies scoped by the name, hostile servers on other
ports) is tests/service/console/test_console_users.py."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import httpx2
import pytest
from starlette.testclient import TestClient

from agentc.service.app import create_app
from agentc.service.hosts import Hosts, Under
from tests.kit.live import admin_at, live_server
from tests.kit.pg import free_port
from tests.service.kit import ADMIN_PASSWORD, ORIGIN, Service

LABEL = "agentc-0123456789abcdef0123456789abcdef"
NAMED = f"http://{LABEL}.localhost:8080"
SERVER = str(Path(sys.executable).with_name("agent-coordinator-server"))
COOKIE = "coordinator_local"


@pytest.mark.parametrize(
    ("origin", "host", "under"),
    [
        (NAMED, f"{LABEL}.localhost:8080", Under.CONSOLE),
        (NAMED, f"{LABEL.upper()}.LOCALHOST:8080", Under.CONSOLE),
        (NAMED, f"{LABEL}.localhost:9999", Under.FOREIGN),  # the name on another port
        (NAMED, f"{LABEL}.localhost", Under.FOREIGN),
        (NAMED, "127.0.0.1:8080", Under.LOOPBACK),
        (NAMED, "127.5.6.7", Under.LOOPBACK),
        (NAMED, "[::1]:8080", Under.LOOPBACK),
        (NAMED, "localhost:8080", Under.LOOPBACK),
        (NAMED, None, Under.LOOPBACK),
        (NAMED, "evil.example:8080", Under.FOREIGN),  # a name rebound to 127.0.0.1
        (NAMED, "evil.localhost:8080", Under.FOREIGN),
        (NAMED, "127.0.0.1.nip.io:8080", Under.FOREIGN),
        (NAMED, "evil.example@127.0.0.1:8080", Under.FOREIGN),
        (NAMED, "127.0.0.1:8080/x", Under.FOREIGN),
        (NAMED, "", Under.FOREIGN),
        ("https://coord.example", "coord.example", Under.CONSOLE),
        ("https://coord.example", "coord.example:443", Under.CONSOLE),
        ("https://coord.example", "coord.example:8443", Under.FOREIGN),
        ("https://coord.example:8443", "coord.example:8443", Under.CONSOLE),
        ("http://[::1]:8080", "[::1]:8080", Under.CONSOLE),
        (ORIGIN, "127.0.0.1:8080", Under.CONSOLE),
        (ORIGIN, "localhost:8080", Under.LOOPBACK),
    ],
)
def test_which_name_a_request_came_under(origin: str, host: str | None, under: Under) -> None:
    hosts = Hosts(origin)
    raw = host.encode() if host is not None else None
    assert hosts.under(raw) is under
    assert hosts.under(raw) is under  # the cached answer is the same


@pytest.fixture
def named(svc: Service) -> Iterator[TestClient]:
    """The same database served with the console at its own name (as `agentc up` does)."""
    settings = svc.settings.model_copy(update={"public_origin": NAMED})
    app = create_app(settings, clock=svc.clock, executor=svc.executor)
    with TestClient(app, base_url=NAMED, client=("127.0.0.1", 40000)) as client:
        yield client


def sign_in(client: TestClient, host: str | None = None) -> httpx2.Response:
    headers = {"Origin": NAMED, **({"Host": host} if host else {})}
    body = {"username": "admin", "password": ADMIN_PASSWORD}
    return client.post("/api/v1/auth/login", json=body, headers=headers)


def rows(svc: Service, table: str) -> int:
    count = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one()
    )
    return int(count)


def test_a_browser_session_is_made_and_good_only_under_the_consoles_name(
    svc: Service, named: TestClient
) -> None:
    sessions = rows(svc, "browser_sessions")
    # Under 127.0.0.1 (what every local program may serve pages at) nobody signs in: the
    # password is not even checked (no failure counted), and no cookie is set.
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080"):
        resp = sign_in(named, host)
        assert resp.status_code == 421 and "set-cookie" not in resp.headers, resp.text
        assert resp.json()["error"]["code"] == "misdirected_request"
        form = named.post(
            "/console/sign-in",
            data={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"Origin": NAMED, "Host": host},
            follow_redirects=False,
        )
        assert form.status_code == 421 and "set-cookie" not in form.headers
        assert "Open the console at its own address" in form.text
    assert rows(svc, "browser_sessions") == sessions and rows(svc, "sign_in_failures") == 0
    # Under its own name: a host-only cookie (no Domain), good there.
    ok = sign_in(named)
    assert ok.status_code == 200
    set_cookie = ok.headers["set-cookie"]
    assert "domain" not in set_cookie.lower() and "samesite=strict" in set_cookie.lower()
    cookie = ok.cookies["coordinator_local"]
    named.cookies.clear()
    named.cookies.set("coordinator_local", cookie)
    assert named.get("/api/v1/me").status_code == 200
    # The same cookie presented under 127.0.0.1 (a program that got it) is refused there...
    refused = named.get("/api/v1/me", headers={"Host": "127.0.0.1:8080"})
    assert refused.status_code == 401 and "own address" in refused.text
    page = named.get("/console/projects", headers={"Host": "127.0.0.1:8080"})
    assert page.status_code == 421 and LABEL not in page.text
    # ...and under any other name everything is refused (a page rebound to 127.0.0.1).
    assert named.get("/api/v1/me", headers={"Host": "evil.example:8080"}).status_code == 421
    # Programs keep using loopback with bearer tokens.
    token = svc.admin.post("/api/v1/admin/agents", {"name": "bot"})["token"]
    named.cookies.clear()
    me = named.get(
        "/api/v1/me", headers={"Host": "127.0.0.1:8080", "Authorization": f"Bearer {token}"}
    )
    assert me.status_code == 200 and me.json()["data"]["actor"]["name"] == "bot"


GETS = (
    "/",
    "/console",
    "/console/projects",
    "/console/sign-in",
    "/console/sign-in?next=/console/access",
    "/console/no/such/page",
    "/favicon.ico",
    "/healthz",
    "/api/v1/info",
    "/api/v1/openapi.json",
    "/api/v1/help/authentication",
    "/api/v1/me",
    "/api/v1/no/such",
)


def test_nothing_answered_under_another_name_tells_the_consoles_name(named: TestClient) -> None:
    """What a local program, or a page whose name was rebound to 127.0.0.1, can read: the
    console's name (the secret part of its address) is in no answer, no header, no redirect."""
    named.cookies.clear()
    hosts = ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "evil.example:8080")
    for host in (*hosts, f"{LABEL}.localhost:9999"):
        for path in GETS:
            resp = named.get(path, headers={"Host": host}, follow_redirects=False)
            assert LABEL not in resp.text and LABEL not in str(resp.headers), (host, path)
            if host.startswith(("evil", LABEL)):  # not the service's name: nothing answers
                assert resp.status_code == 421, (host, path)
        post = named.post(
            "/console/sign-in", data={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"Host": host, "Origin": NAMED}, follow_redirects=False,
        )  # fmt: skip
        assert post.status_code == 421 and LABEL not in post.text + str(post.headers)
    info = named.get("/api/v1/info", headers={"Host": "127.0.0.1:8080"}).json()["data"]
    assert info["public_origin"] is None
    assert named.get("/api/v1/info").json()["data"]["public_origin"] == NAMED
    # The console's pages under its own name are the usual ones.
    assert named.get("/console/sign-in").status_code == 200


def test_a_session_made_at_one_address_is_refused_at_another(
    svc: Service, named: TestClient
) -> None:
    """The console moved (a new port, a new name): a cookie a browser still sends to the old
    name, where anyone may now listen, is no session at the new one."""
    old = sign_in(named).cookies["coordinator_local"]
    moved = f"http://agentc-{'f' * 32}.localhost:8181"
    settings = svc.settings.model_copy(update={"public_origin": moved})
    app = create_app(settings, clock=svc.clock, executor=svc.executor)
    with TestClient(app, base_url=moved) as client:
        client.cookies.set("coordinator_local", old)
        assert client.get("/api/v1/me").status_code == 401
        page = client.get("/console/projects", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"].startswith("/console/sign-in")
    # Sessions made before sessions recorded their origin are refused too (migration 0007).
    svc.executor.write(
        lambda tx: tx.conn.exec_driver_sql("UPDATE browser_sessions SET origin = NULL")
    )
    named.cookies.set("coordinator_local", old)
    assert named.get("/api/v1/me").status_code == 401


def test_the_host_ends_every_browser_session(svc: Service) -> None:
    other = svc.login("admin", ADMIN_PASSWORD)
    assert other.raw("GET", "/api/v1/me").status_code == 200
    out = svc.host("end-browser-sessions")
    assert out.returncode == 0 and "ended 2 browser session(s)" in out.stdout, out
    assert other.raw("GET", "/api/v1/me").status_code == 401
    assert svc.admin.raw("GET", "/api/v1/me").status_code == 401
    kinds = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql(
            "SELECT data_json FROM events WHERE kind = 'browser_sessions_ended'"
        ).all()
    )
    assert [k[0] for k in kinds] == ['{"count":2,"via":"host"}']


def _quick_start(state: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    """`agent-coordinator-server up`: the coordinator alone; its console's address (banner)."""
    proc = subprocess.Popen(
        [SERVER, "up", "--state-dir", str(state), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.match(r"agentc coordinator: (http://agentc-[0-9a-f]{32}\.localhost:\d+)$", line)
    assert found, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc, found.group(1)
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the coordinator did not answer")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    return err


def test_the_quick_start_serves_the_console_at_a_name_of_its_own(tmp_path: Path) -> None:
    state, port = tmp_path / "state", free_port()
    proc, console = _quick_start(state, port)
    try:
        assert console.endswith(f":{port}")
        assert oct((state / "console-origin").stat().st_mode & 0o777) == "0o600"
        password = (state / "admin-password").read_text().strip()
        with closing(admin_at(f"http://127.0.0.1:{port}", console, password)) as admin:
            assert admin.get("/api/v1/me").status_code == 200
            cookie = admin.cookies["coordinator_local"]
    finally:
        log = _stop(proc)
    assert "warning" not in log, log  # a name of its own is no shared address
    proc, again = _quick_start(state, port)  # the same port: the same name...
    try:
        assert again == console
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as program:
            program.headers.update(
                {"Host": urlsplit(console).netloc, "Cookie": f"{COOKIE}={cookie}"}
            )
            assert (
                program.get("/api/v1/me").status_code == 401
            )  # ...and the last run's sessions end
    finally:
        _stop(proc)
    moved = free_port()
    proc, renamed = _quick_start(state, moved)  # another port: another name
    try:
        assert renamed != console and renamed.endswith(f":{moved}")
    finally:
        _stop(proc)


def test_serving_at_a_shared_address_warns(sqlite_database: str, tmp_path: Path) -> None:
    """A public origin of 127.0.0.1 (development, these tests' own servers) shares the
    console's cookie with every server on 127.0.0.1: `serve` says so."""
    with live_server(sqlite_database, tmp_path) as shared:
        pass
    with live_server(sqlite_database, tmp_path, named=True) as named_server:
        pass
    assert "warning: the public origin http://127.0.0.1" in shared.log.read_text()
    assert "warning" not in named_server.log.read_text()


def test_the_quick_start_refuses_the_directory_agentc_up_owns(tmp_path: Path) -> None:
    """`agentc up` owns its state directory (it keeps up.json there); the coordinator alone
    refuses it, naming the owner, and writes nothing into it."""
    from agentc.service.cli import UP_RECORD
    from agentc.up.layout import Layout

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    assert Layout(state).record.name == UP_RECORD  # the name agentc up writes
    (state / UP_RECORD).write_text("{}")
    done = subprocess.run(
        [SERVER, "up", "--state-dir", str(state), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "this is `agentc up`'s state directory" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in state.iterdir()) == [UP_RECORD]
