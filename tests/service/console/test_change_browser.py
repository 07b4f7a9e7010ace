"""Chromium reads a submission's change (a rename, a binary file, a folded large file), opens
the folded file and switches to side by side, with no console error (a CSP violation would be
one) and no script run from the agent's text."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page, expect

from agentc.supervisor.contracts import implementer_prompt
from agentc.supervisor.loop.feedback import of_workflow
from tests.kit.live import LiveServer
from tests.service.console.change_kit import agent_review, submitted_live
from tests.service.console.kit import Agent, browser, page, server, sign_in

__all__ = ["browser", "page", "server"]


def test_a_submissions_change_in_the_browser(page: Page, server: LiveServer, tmp_path: Path):
    pid, task, _sub = submitted_live(server, tmp_path, "human")
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


def test_review_on_the_lines_in_the_browser(page: Page, server: LiveServer, tmp_path: Path):
    """An agent reviewer's finding is shown on its line; a person clicks a line number,
    comments and requests changes; the comment is a finding with file and line, and the next
    implementer's prompt carries it."""
    pid, task, sub = submitted_live(server, tmp_path, "both")
    with Agent(server, pid, name="reviewer") as reviewer:
        flow = reviewer.client.get(f"/api/v1/projects/{pid}/tasks/{task['id']}/workflow")
        finding = {"severity": "advisory", "remedy": "say why 2", "path": "app.py", "line": 2}
        agent_review(reviewer.post, pid, flow.json()["data"], sub["id"], "approved", [finding])
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError("a script ran")))
    sign_in(page, server)
    change = f"{server.url}/console/projects/{pid}/tasks/{task['id']}/submissions/{sub['id']}"
    page.goto(change)
    app = page.locator("details.file", has_text="app.py")
    expect(app.locator("tr.notes")).to_contain_text("say why 2")  # the agent's, on its line
    expect(page.locator("#criteria")).to_contain_text("it works")
    # A click on the new line number 5 of app.py puts it in the first comment.
    app.locator("tr[id$='-n5'] td.ln").nth(1).click()
    expect(page.locator("#cpath0")).to_have_value("app.py")
    expect(page.locator("#cline0")).to_have_value("5")
    expect(page.locator("#crem0")).to_be_focused()
    page.locator("#crem0").fill("print nothing here")
    page.get_by_label("Request changes").check()
    page.locator("#summary").fill("one line to fix")
    page.get_by_role("button", name="Send review").click()
    expect(page).to_have_url(change)
    expect(app.locator("tr.notes", has_text="print nothing here")).to_be_visible()
    expect(page.locator("#review-form")).to_have_count(0)
    with Agent(server, pid, name="implementer", credential_class="supervised") as agent:
        fresh = agent.client.get(f"/api/v1/projects/{pid}/tasks/{task['id']}").json()["data"]
        claimed = agent.post(
            f"/api/v1/projects/{pid}/claims",
            {"task_id": task["id"], "expected_task_revision": fresh["revision"]},
        )["claim"]
        flow = agent.client.get(f"/api/v1/projects/{pid}/tasks/{task['id']}/workflow")
    prompt = implementer_prompt(
        project=pid,
        task=claimed["task"],
        session="s",
        attempt=claimed["attempt"]["id"],
        generation=claimed["attempt"]["generation"],
        checkout="/c",
        instructions={},
        feedback=of_workflow(flow.json()["data"]),
    )
    data = json.loads(prompt.split("<task-data>\n")[1].split("\n</task-data>")[0])
    [review] = data["changes_requested"]["reviews"]
    assert review["findings"] == [
        {"severity": "required", "remedy": "print nothing here", "path": "app.py", "line": 5}
    ]


def test_an_amendment_is_shown_and_decided_in_the_browser(
    page: Page, server: LiveServer, tmp_path: Path
):
    """A submission that proposes new acceptance criteria: the change page shows the proposal
    (its rationale, the new criteria with the evidence given for them) above the task's
    criteria it would replace; a person approves it with the amendment accepted, and the task's
    criteria are the new ones. The agent's criteria are hostile markup: shown as text, never
    run."""
    amend = ["it works twice", "<img src=x onerror=alert(1)> it says so"]
    pid, task, sub = submitted_live(server, tmp_path, "human", amend=amend)
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError("a script ran")))
    sign_in(page, server)
    page.goto(f"{server.url}/console/projects/{pid}/tasks/{task['id']}/submissions/{sub['id']}")
    proposal = page.locator("#amendment")
    expect(proposal).to_contain_text("the criterion says too little")
    for criterion in amend:
        expect(page.locator("#amended dt", has_text=criterion)).to_be_visible()
        expect(page.locator("#amended")).to_contain_text(f"checked: {criterion}")
    expect(page.locator("#criteria dt")).to_have_text(["it works"])
    expect(page.locator("#criteria dd")).to_have_text(["No evidence given."])
    page.get_by_label("Approve").check()
    page.locator("#summary").fill("the new criteria say more")
    page.get_by_label("Decision on the amendment").select_option("accepted")
    page.get_by_role("button", name="Send review").click()
    page.goto(f"{server.url}/console/projects/{pid}/tasks/{task['id']}")
    expect(page.locator("main ol").first.locator("li")).to_have_text(amend)
    expect(page.locator("p.amendment")).to_contain_text("the criterion says too little")
    expect(page.get_by_text('"rationale"')).to_have_count(0)  # no raw JSON
