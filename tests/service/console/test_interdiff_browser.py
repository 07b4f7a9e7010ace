"""Chromium reads what changed since the review: the change page of a submission that amends
a reviewed one, through a real server, the reviewer and the next attempt working through the
API; the agent's markup stays text (no script runs, no console error: a CSP violation would
be one), the link leads to the reviewed change, and axe-core finds nothing serious."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.kit.changes import AMENDED, HOSTILE, amend_change, make_change
from tests.kit.live import LiveServer
from tests.service.console.change_kit import amended_live, submitted_live
from tests.service.console.kit import (
    browser,
    page,
    serious_violations,
    server,
    sign_in,
    with_axe,
)

__all__ = ["browser", "page", "server"]


def test_what_changed_since_the_review_in_the_browser(
    page: Page, server: LiveServer, tmp_path: Path
) -> None:
    change = make_change(tmp_path / "repo")
    pid, task, first = submitted_live(server, tmp_path, "agent", change=change)
    second = amended_live(server, pid, task, first, amend_change(change))
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError("a script ran")))
    with_axe(page)
    sign_in(page, server)
    changes = f"{server.url}/console/projects/{pid}/tasks/{task['id']}/submissions/"
    page.goto(changes + second["id"])
    since = page.locator("#since-review")
    expect(since.get_by_role("heading", name="Since the review")).to_be_visible()
    expect(since).to_contain_text("changes requested by an agent")
    files = page.locator("#since-files")
    expect(files.locator("li", has_text="app.py")).to_contain_text("changed since the review")
    expect(files.locator("li", has_text="notes.txt")).to_contain_text("newly changed")
    expect(files.locator("li", has_text="large.txt")).to_contain_text("unchanged")
    app = since.locator("details.file", has_text="app.py")
    expect(app.locator("tr.before", has_text=HOSTILE)).to_be_visible()  # shown as text
    expect(app.locator("tr.after", has_text=f"{AMENDED} </table><b>")).to_be_visible()
    assert serious_violations(page) == []
    files.get_by_role("link", name="app.py").click()
    expect(app).to_be_in_viewport()
    since.get_by_role("link", name="the submission of").click()
    page.wait_for_url(changes + first["id"])
    expect(page.locator("#since-review")).to_have_count(0)
    expect(page.get_by_role("heading", name="6 files changed")).to_be_visible()
