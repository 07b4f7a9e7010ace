"""Browser test kit: a real coordinator (tests/kit/live.py) and Debian's Chromium driven by
Playwright (Playwright's own browser download is not used)."""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server
from tests.service.kit import ORIGIN, Caller, Service

CHROMIUM = Path("/usr/bin/chromium")
# axe-core, pinned in tools/axe/package.json and installed by scripts/setup --dev.
AXE = Path(__file__).resolve().parents[3] / "tools/axe/node_modules/axe-core/axe.min.js"
# What axe reports of each violation: its rule, impact, help and the first elements it names.
_AXE_RUN = """async () => {
    const found = await axe.run(document, {resultTypes: ["violations"]});
    return found.violations.map(v => ({
        id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ")),
    }));
}"""


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
def page(browser: Browser, server: LiveServer) -> Iterator[Page]:
    """A tab whose console errors fail the test. It needs the server so that it closes first:
    a page's live parts keep polling, and a poll after the server stopped would be refused."""
    del server  # only its lifetime matters
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield tab
    context.close()
    assert errors == [], errors  # a CSP violation or a script error shows up here


def with_axe(page: Page) -> None:
    """Every document the tab loads from now on carries axe-core, injected by Playwright from
    the local file as an init script (outside the page's CSP, which stays as it is)."""
    if not AXE.exists():
        pytest.fail("axe-core is missing: run scripts/setup --dev")
    page.add_init_script(path=AXE)


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of the page as it is now (``with_axe``)."""
    found: list[dict[str, Any]] = page.evaluate(_AXE_RUN)
    return [v for v in found if v["impact"] in ("serious", "critical")]


def sign_in(page: Page, live: LiveServer, password: str = ADMIN_PASSWORD) -> None:
    page.goto(live.url + "/console/projects")
    page.get_by_label("Name").fill("admin")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/console/projects")


class Agent:
    """An agent working through the API with its own token and session."""

    def __init__(
        self,
        live: LiveServer,
        project_id: str,
        name: str | None = None,
        credential_class: str = "interactive",
    ) -> None:
        """``credential_class="supervised"``: a loop's, which records an attempt's artifacts."""
        self.token = live.issue_token(
            name or f"worker-{uuid.uuid4().hex[:6]}", project_id, credential_class=credential_class
        )
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


def form_of(svc: Service, path: str = "/console/access") -> dict[str, str]:
    """The hidden fields a console form at path carries: the CSRF token and a fresh key."""
    text = svc.client.get(path).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', text)
    assert csrf, text
    return {"csrf": csrf.group(1), "idempotency_key": "key-" + uuid.uuid4().hex}


def post_form(
    svc: Service, path: str, data: Mapping[str, str | list[str]], origin: str | None = ORIGIN
) -> httpx2.Response:
    headers = {"Origin": origin} if origin else {}
    return svc.client.post(path, data=data, headers=headers, follow_redirects=False)


def browse_as(svc: Service, caller: Caller) -> None:
    """The test client's cookie jar holds the caller's browser session (and nothing else)."""
    svc.client.cookies.clear()
    svc.client.cookies.set("coordinator_local", caller.cookies["coordinator_local"])
