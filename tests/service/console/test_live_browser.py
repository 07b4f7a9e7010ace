"""Chromium watches a running attempt without reloading: the task page shows its elapsed time
and the current step its supervisor tells with each renewal (agent text, escaped), the board
marks the task while an agent works on it; no console error (a CSP violation would be one)."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.kit.live import LiveServer
from tests.service.console.kit import Agent, browser, page, server, sign_in

__all__ = ["browser", "page", "server"]


def test_a_live_attempt_updates_the_page_without_a_reload(page: Page, server: LiveServer):
    admin = server.admin_client()
    pid = admin.post(
        "/api/v1/projects",
        json={"name": "live", "repository_url": "https://git.example/l.git"},
        headers={"Idempotency-Key": "live-project"},
    ).json()["data"]["id"]
    task = admin.post(
        f"/api/v1/projects/{pid}/tasks",
        json={"title": "Work live", "acceptance_criteria": ["it works"], "kind": "code"},
        headers={"Idempotency-Key": "live-task"},
    ).json()["data"]["task"]
    admin.close()
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError("a script ran")))
    sign_in(page, server)
    board = f"{server.url}/console/projects/{pid}"
    page.goto(board)
    card = page.locator(f'li.task-card[data-task="{task["id"]}"]')
    expect(card).to_be_visible()
    expect(card.locator(".working")).to_have_count(0)
    page.evaluate("window.__stayed = true")  # gone if the page were loaded again
    with Agent(server, pid, name="live-loop", credential_class="supervised") as loop:
        attempt = loop.post(
            f"/api/v1/projects/{pid}/claims", {"task_id": task["id"], "expected_task_revision": 1}
        )["claim"]["attempt"]
        at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
        expect(card.locator(".working")).to_contain_text("an agent is working on it")
        assert page.evaluate("window.__stayed") is True

        page.goto(f"{board}/tasks/{task['id']}")
        page.evaluate("window.__stayed = true")
        working = page.locator(f"#working-{attempt['id']}")
        expect(working).to_contain_text("Working now, for")
        loop.post(f"{at}/renew", {"generation": attempt["generation"], "step": "Bash: git status"})
        expect(working.locator(".step-now")).to_have_text("Bash: git status")
        hostile = "Write: <script>alert(1)</script> greeting.txt"
        loop.post(f"{at}/renew", {"generation": attempt["generation"], "step": hostile})
        expect(working.locator(".step-now")).to_have_text(hostile)  # as text, not markup
        loop.post(f"{at}/release", {"generation": attempt["generation"], "handoff": "done here"})
        expect(working).to_have_count(0)
        assert page.evaluate("window.__stayed") is True
