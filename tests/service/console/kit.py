"""Browser test kit: a real coordinator (tests/kit/live.py) and Debian's Chromium driven by
Playwright (Playwright's own browser download is not used)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def server(sqlite_database: str, tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(sqlite_database, tmp_path) as live:
        yield live


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: run scripts/setup --dev")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield tab
    context.close()
    assert errors == [], errors  # a CSP violation or a script error shows up here


def sign_in(page: Page, live: LiveServer, password: str = ADMIN_PASSWORD) -> None:
    page.goto(live.url + "/console/projects")
    page.get_by_label("Name").fill("admin")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/console/projects")


class Agent:
    """An agent working through the API with its own token and session."""

    def __init__(self, live: LiveServer, project_id: str, name: str | None = None) -> None:
        self.token = live.issue_token(name or f"worker-{uuid.uuid4().hex[:6]}", project_id)
        self.proof = secrets.token_hex(32)
        self.client = httpx.Client(
            base_url=live.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )
        s = self.post(
            "/api/v1/sessions", {"harness": "test"}, {"X-Coordinator-Session-Proof": self.proof}
        )
        self.client.headers["X-Coordinator-Session"] = s["session_id"]
        self.client.headers["X-Coordinator-Session-Proof"] = self.proof

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.client.close()

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
        h = {"Idempotency-Key": str(uuid.uuid4()), **(headers or {})}
        resp = self.client.post(path, json=body, headers=h)
        assert resp.status_code < 300, resp.text
        return resp.json()["data"]
