"""axe-core (tools/axe, injected by Playwright from the local file) finds no serious or critical
accessibility violation on the task page (with an attempt's run, a live attempt and the review
form), the change page (both views, with the review form beside the diff; and at phone width)
and the board (a task marked as worked on), with no console error (a CSP violation would be one)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.kit.live import LiveServer
from tests.service.console.change_kit import submitted_live
from tests.service.console.kit import (
    Agent,
    browser,
    page,
    serious_violations,
    server,
    sign_in,
    with_axe,
)

__all__ = ["browser", "page", "server"]


def test_the_work_pages_have_no_serious_accessibility_violation(
    page: Page, server: LiveServer, tmp_path: Path
) -> None:
    pid, task, sub = submitted_live(server, tmp_path, "human", steps=True)
    admin = server.admin_client()
    other = admin.post(
        f"/api/v1/projects/{pid}/tasks",
        json={"title": "Work live", "acceptance_criteria": ["it works"], "kind": "code"},
        headers={"Idempotency-Key": "axe-live-task"},
    ).json()["data"]["task"]
    admin.close()
    with_axe(page)
    sign_in(page, server)
    with Agent(server, pid, name="live-loop", credential_class="supervised") as loop:
        attempt = loop.post(
            f"/api/v1/projects/{pid}/claims",
            {"task_id": other["id"], "expected_task_revision": other["revision"]},
        )["claim"]["attempt"]
        loop.post(
            f"/api/v1/projects/{pid}/attempts/{attempt['id']}/renew",
            {"generation": attempt["generation"], "step": "Bash: git status"},
        )
        board = f"{server.url}/console/projects/{pid}"
        checked = {
            "board": (board, "li.task-card .working"),
            "task": (f"{board}/tasks/{task['id']}", "article.run"),
            "live task": (f"{board}/tasks/{other['id']}", ".step-now"),
            "change": (f"{board}/tasks/{task['id']}/submissions/{sub['id']}", "#review-form"),
            "change, side by side": (
                f"{board}/tasks/{task['id']}/submissions/{sub['id']}?view=split",
                "table.diff.split",
            ),
        }
        found = {}
        for name, (url, shown) in checked.items():
            page.goto(url)
            expect(page.locator(shown).first).to_be_visible()
            found[name] = serious_violations(page)
    assert found == dict.fromkeys(checked, []), found
    # At phone width the change page is no wider than the screen and its diff stays a table
    # (the narrow screens' rule stacks other tables' cells); axe finds nothing serious there.
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(checked["change"][0])
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    number = page.locator("table.diff td.ln").first
    assert number.evaluate("cell => getComputedStyle(cell).display") == "table-cell"
    assert serious_violations(page) == []
    # The check can fail: a text field without a label, added to the page, is found.
    page.evaluate("document.querySelector('main').append(document.createElement('input'))")
    assert [v["id"] for v in serious_violations(page)] == ["label"]
