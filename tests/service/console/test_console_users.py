"""Other people and programs on the same machine, played for real: Debian's Chromium (through
Playwright) signs in to a real coordinator served at its own name, as `agentc up` serves it
(``http://agentc-<random>.localhost:PORT``), then visits a hostile server on another loopback
port; a local program guesses the admin's password from sixty 127/8 source addresses while the
person signs in. docs/security.md, "Other users on the same machine", cites these tests."""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server
from tests.kit.pg import free_port
from tests.service.console.kit import browser

__all__ = ["browser"]  # fixture
COOKIE, DEVICE = "coordinator_local", "coordinator_device"


@dataclass
class Seen:
    host: str
    path: str
    cookie: str | None
    referer: str | None


@dataclass
class Hostile:
    """A server another local user (or program) runs on a loopback port: it records what
    browsers send it and can set cookies of its own."""

    port: int
    seen: list[Seen] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> None:
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:
                h = self.headers
                seen.append(Seen(h["Host"], self.path, h["Cookie"], h["Referer"]))
                self.send_response(200)
                if self.path.startswith("/toss"):  # cookies for every *.localhost, it hopes
                    for domain in ("localhost", ".localhost"):
                        self.send_header(
                            "Set-Cookie", f"{COOKIE}=tossed{'0' * 60}; Domain={domain}; Path=/"
                        )
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(b"<!doctype html><title>a page</title><p>hello")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def cookies(self) -> list[str]:
        return [s.cookie for s in self.seen if s.cookie]


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    server = Hostile(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    yield ctx
    ctx.close()


def sign_in(page: Page, console: str) -> None:
    page.goto(console + "/console/projects")
    page.get_by_label("Name").fill("admin")
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/console/projects")
    expect(page.get_by_role("heading", name="Projects")).to_be_visible()


def as_console(server: LiveServer) -> httpx.Client:
    """A program that reaches the service on loopback and says the console's name in Host
    (what a hostile server that learned the name would do)."""
    host = urlsplit(server.console).netloc
    return httpx.Client(base_url=server.url, headers={"Host": host}, timeout=30)


def label_of(server: LiveServer) -> str:
    return (urlsplit(server.console).hostname or "").split(".")[0]


def test_a_hostile_server_on_another_loopback_port_gets_no_session_it_can_use(
    sqlite_database: str, tmp_path: Path, context: BrowserContext, hostile: Hostile
) -> None:
    with live_server(sqlite_database, tmp_path, named=True) as server:
        label = label_of(server)
        page = context.new_page()
        # At 127.0.0.1 (the address every local program shares) nobody signs in: the page
        # says where the console is, without naming it.
        page.goto(server.url + "/console/projects")
        expect(
            page.get_by_role("heading", name="Open the console at its own address")
        ).to_be_visible()
        assert label not in page.content()
        sign_in(page, server.console)
        session = next(c for c in context.cookies(server.console) if c["name"] == COOKIE)
        assert session["domain"] == urlsplit(server.console).hostname  # host-only
        # Leaving the console for the hostile page (as a link would) sends it no Referer.
        page.evaluate(f"location.href = 'http://127.0.0.1:{hostile.port}/from-the-console'")
        page.wait_for_url("**/from-the-console")
        # The hostile server under 127.0.0.1 and localhost: no cookie, ever.
        for host in ("127.0.0.1", "localhost"):
            page.goto(f"http://{host}:{hostile.port}/visit")
        # It tries to plant a session cookie for every *.localhost name: the console never
        # receives it (the browser keeps it to localhost), and the person stays signed in.
        page.goto(f"http://localhost:{hostile.port}/toss")
        page.goto(server.console + "/console/access")
        expect(page.get_by_role("heading", name="Access")).to_be_visible()
        sent = {c["value"] for c in context.cookies(server.console) if c["name"] == COOKIE}
        assert sent == {session["value"]}
        got = hostile.cookies()  # only its own planted cookie comes back to it
        assert all(session["value"] not in c and DEVICE not in c for c in got), got
        first = hostile.seen[0]  # the navigation from the console's page
        assert first.path == "/from-the-console" and first.referer is None, hostile.seen
        assert all(label not in (s.referer or "") for s in hostile.seen), hostile.seen
        assert all(label not in s.host + s.path for s in hostile.seen)
        # Without the cookie or the name it can do nothing as the person: under 127.0.0.1 the
        # service gives neither, and refuses sign-ins and sessions.
        with httpx.Client(base_url=server.url, timeout=30) as program:
            for path in ("/console/projects", "/api/v1/info", "/api/v1/openapi.json"):
                assert label not in program.get(path).text
            assert program.get("/api/v1/info").json()["data"]["public_origin"] is None
        # Browsers scope cookies by name, not port: a server visited under the console's own
        # name on another port is sent the cookie. That is why the name is the secret part
        # (the Referer, the service and the process list never show it) ...
        page.goto(f"{server.console.rsplit(':', 1)[0]}:{hostile.port}/same-name")
        assert hostile.cookies() and session["value"] in hostile.cookies()[-1]
        # ... and why, once a name may have reached someone (the console moved to another
        # port, a new name; the old one's port is anyone's), a session made there is refused.
        old_console, old_port = server.console, urlsplit(server.url).port
    with live_server(sqlite_database, tmp_path, named=True) as moved:
        assert moved.console != old_console
        squatter = Hostile(int(old_port or 0))  # another user takes the port that was freed
        squatter.start()
        try:
            page.goto(old_console + "/console/projects")  # the person's old bookmark
        finally:
            squatter.stop()
        stolen = squatter.cookies()[-1]
        assert session["value"] in stolen
        with as_console(moved) as program:
            program.headers["Cookie"] = stolen
            assert program.get("/api/v1/me").status_code == 401
            assert program.get("/console/projects").status_code == 303  # to sign-in
            program.headers["Host"] = urlsplit(old_console).netloc  # the old name: not served
            assert program.get("/api/v1/me").status_code == 421
        page.close()


WRONG = "wrong password, again"


def guess(server: LiveServer, source: str, password: str = WRONG) -> int:
    """One sign-in from a loopback source address, by a program that knows the console's name
    (as anyone with an account there does)."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=server.url, transport=transport, timeout=30) as program:
        resp = program.post(
            "/api/v1/auth/login",
            json={"username": "admin", "password": password},
            headers={"Host": urlsplit(server.console).netloc, "Origin": server.console},
        )
    return resp.status_code


def test_a_local_program_guessing_from_all_of_127_does_not_keep_the_person_out(
    sqlite_database: str, tmp_path: Path, context: BrowserContext
) -> None:
    with live_server(sqlite_database, tmp_path, named=True) as server:
        page = context.new_page()
        sign_in(page, server.console)  # this browser signed in before: it holds a device cookie
        assert any(c["name"] == DEVICE for c in context.cookies(server.console))
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url("**/console/sign-in")
        # Sixty guesses from sixty 127/8 source addresses, one account: limited as one.
        codes = [guess(server, f"127.0.{i // 200}.{i % 200 + 2}") for i in range(60)]
        assert codes.count(401) <= 8 and codes.count(429) >= 52, codes
        assert set(codes) == {401, 429}
        # The guesser goes on while the person signs in with the right password: in.
        stop = threading.Event()
        seen: list[int] = []

        def keep_guessing() -> None:
            i = 0
            while not stop.is_set():
                seen.append(guess(server, f"127.1.{i % 200}.{i % 50 + 2}"))
                i += 1

        guesser = threading.Thread(target=keep_guessing)
        guesser.start()
        try:
            page.get_by_label("Name").fill("admin")
            page.get_by_label("Password").fill(ADMIN_PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url("**/console/projects")
            expect(page.get_by_role("heading", name="Projects")).to_be_visible()
        finally:
            stop.set()
            guesser.join()
        assert seen and 429 in seen  # it was being held back all along
        # A browser that never signed in shares the account's lane with the guesser: it is
        # told to wait (a number of seconds), not refused for good. The guesser's latest
        # counted failure starts a fresh wait (waits that ran out meanwhile count for nothing).
        deadline = time.monotonic() + 300
        while guess(server, "127.2.0.2") != 401:
            assert time.monotonic() < deadline, "the account's wait never ended"
            time.sleep(0.5)
        fresh = context.browser.new_context() if context.browser else None
        assert fresh is not None
        try:
            other = fresh.new_page()
            other.goto(server.console + "/console/sign-in")
            other.get_by_label("Name").fill("admin")
            other.get_by_label("Password").fill(ADMIN_PASSWORD)
            other.get_by_role("button", name="Sign in").click()
            alert = other.get_by_role("alert")
            expect(alert).to_contain_text("too many failed sign-ins for this account")
            assert re.search(r"wait \d+ s", alert.inner_text())
        finally:
            fresh.close()
        page.close()
