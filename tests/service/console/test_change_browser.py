"""Chromium reads a submission's change (a rename, a binary file, a folded large file), opens
the folded file and switches to side by side, with no console error (a CSP violation would be
one) and no script run from the agent's text."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from agentc.supervisor.loop.patch import of_revisions
from tests.kit.changes import make_change
from tests.kit.live import LiveServer
from tests.service.console.kit import Agent, browser, page, server, sign_in
from tests.service.kit import evidence

__all__ = ["browser", "page", "server"]


def test_a_submissions_change_in_the_browser(page: Page, server: LiveServer, tmp_path: Path):
    change = make_change(tmp_path / "repo")
    admin = server.admin_client()
    pid = admin.post(
        "/api/v1/projects",
        json={
            "name": "diffs",
            "repository_url": "https://git.example/d.git",
            "review_mode": "human",
        },
        headers={"Idempotency-Key": "diffs"},
    ).json()["data"]["id"]
    task = admin.post(
        f"/api/v1/projects/{pid}/tasks",
        json={"title": "Change things", "acceptance_criteria": ["it works"], "kind": "code"},
        headers={"Idempotency-Key": "task"},
    ).json()["data"]["task"]
    admin.close()
    with Agent(server, pid) as agent:
        attempt = agent.post(
            f"/api/v1/projects/{pid}/claims", {"task_id": task["id"], "expected_task_revision": 1}
        )["claim"]["attempt"]
        at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
        sub = agent.post(
            f"{at}/submissions",
            {
                "generation": attempt["generation"],
                "kind": "code",
                "summary": "did it",
                "acceptance_evidence": evidence(["it works"]),
                "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/l1",
                "candidate_revision": change.candidate,
                "base_revision": change.base,
            },
        )["submission"]
        body = of_revisions(change.repo, change.base, change.candidate, 1 << 20)
        agent.post(f"{at}/artifacts/patch", {**body, "submission_id": sub["id"]})
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError("a script ran")))
    sign_in(page, server)
    page.goto(f"{server.url}/console/projects/{pid}/tasks/{task['id']}")
    page.get_by_role("link", name="View the change").click()
    expect(page.get_by_role("heading", name="6 files changed")).to_be_visible()
    expect(page.locator("#file-list")).to_contain_text("old_name.txt → new_name.txt")
    expect(page.get_by_text("A binary file: its content is not shown.")).to_be_visible()
    large = page.locator("details.file", has_text="large.txt")
    expect(large.locator("table.diff")).to_be_hidden()  # folded
    large.locator("summary").click()
    expect(large.locator("table.diff")).to_be_visible()
    page.get_by_role("link", name="Side by side").click()
    expect(page.locator("table.diff.split").first).to_be_visible()
