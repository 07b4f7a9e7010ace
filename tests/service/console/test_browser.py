"""A person runs a project end to end from a real browser (Chromium via Playwright) against a
real server; an agent works through the API meanwhile. Nothing secret is left behind."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.kit.live import LiveServer
from tests.service.console.kit import Agent, browser, page, server, sign_in

__all__ = ["browser", "page", "server"]  # fixtures
NEW_PASSWORD = "a brand new passphrase"


def _status(page: Page, expected: str) -> None:
    expect(page.locator("#work-status")).to_have_text(expected, timeout=15_000)


def test_a_task_from_creation_to_approval(page: Page, server: LiveServer) -> None:
    sign_in(page, server)
    page.get_by_text("New project").click()
    page.get_by_label("Name").fill("demo")
    page.get_by_label("Repository URL").fill("https://example.com/demo.git")
    page.get_by_label("Who reviews").select_option("human")
    page.get_by_role("button", name="Create project").click()
    expect(page.get_by_role("heading", name="demo")).to_be_visible()
    project_id = page.url.rsplit("/", 1)[1]

    page.get_by_role("link", name="New task").click()
    page.get_by_label("Title").fill("Write the release notes")
    page.get_by_label("Description").fill("For 1.0.")
    page.get_by_label("Acceptance criteria (one a line)").fill("lists every change\nnames authors")
    page.get_by_label("Priority (0 urgent … 3 low)").select_option("1")
    page.get_by_role("button", name="Create task").click()
    _status(page, "ready")
    task_id = page.url.rsplit("/", 1)[1]

    # An agent claims it through the API: the open page follows without a reload.
    with Agent(server, project_id) as agent:
        task = agent.client.get(f"/api/v1/projects/{project_id}/tasks/{task_id}").json()["data"]
        claimed = agent.post(
            f"/api/v1/projects/{project_id}/claims",
            {"task_id": task_id, "expected_task_revision": task["revision"]},
        )
        _status(page, "in progress")
        attempt = claimed["claim"]["attempt"]
        agent.post(
            f"/api/v1/projects/{project_id}/attempts/{attempt['id']}/submissions",
            {
                "generation": attempt["generation"],
                "kind": "general",
                "summary": "notes written",
                "acceptance_evidence": [
                    {"criterion": "lists every change", "evidence": "see NOTES.md"},
                    {"criterion": "names authors", "evidence": "authors section"},
                ],
            },
        )
    _status(page, "waiting review")
    expect(page.get_by_text("see NOTES.md")).to_be_visible()

    page.reload()
    page.get_by_label("Approve").check()
    page.get_by_label("Summary").fill("Good notes.")
    page.get_by_label("Remedy").first.fill("a typo in the title")
    page.get_by_label("Severity").first.select_option("advisory")
    page.get_by_role("button", name="Send review").click()
    _status(page, "done")
    expect(page.get_by_text("approved by a person")).to_be_visible()
    expect(page.get_by_text("a typo in the title")).to_be_visible()

    page.get_by_role("link", name="demo").click()
    expect(page.locator("#col-done")).to_contain_text("1")
    page.get_by_label("Show").select_option("done")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("link", name="Write the release notes")).to_be_visible()
    _no_secret_left(server, [agent.token, agent.proof, _cookie(page)])


def test_credentials_password_and_sign_out(page: Page, server: LiveServer) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="Access").click()
    page.get_by_label("Agent name").fill("builder")
    page.get_by_label("Access", exact=True).select_option("read")
    page.get_by_role("button", name="Issue").click()
    first = page.get_by_label("Token").input_value()
    assert _works(server, first)

    page.get_by_role("link", name="Back to Access").click()
    expect(page.locator("#credentials")).not_to_contain_text(first)
    page.locator("#credentials tr", has_text="builder").get_by_role("button", name="Rotate").click()
    expect(page.get_by_text("now revoked")).to_be_visible()
    second = page.get_by_label("Token").input_value()
    assert second != first and _works(server, second) and not _works(server, first)

    page.get_by_role("link", name="Back to Access").click()
    live_row = page.locator("#credentials tr").filter(has=page.get_by_role("button", name="Revoke"))
    expect(live_row).to_have_count(1)
    live_row.get_by_role("button", name="Revoke").click()
    expect(live_row).to_have_count(0)
    assert not _works(server, second)

    page.get_by_role("link", name="My account").click()
    page.get_by_label("Current password").fill("correct horse battery staple")
    page.get_by_label("New password (12 characters or more)").fill(NEW_PASSWORD)
    page.get_by_label("New password again").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change the password").click()
    expect(page.get_by_text("The password was changed")).to_be_visible()
    cookie = _cookie(page)

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/console/sign-in")
    page.goto(server.url + "/console/access")
    page.wait_for_url(re.compile(r".*/console/sign-in\?next=.*"))
    gone = httpx.get(server.url + "/api/v1/me", cookies={"coordinator_local": cookie})
    assert gone.status_code == 401  # the signed-out session is refused at once
    sign_in(page, server, NEW_PASSWORD)
    _no_secret_left(server, [first, second, cookie, NEW_PASSWORD])


def _works(server: LiveServer, token: str) -> bool:
    resp = httpx.get(server.url + "/api/v1/projects", headers={"Authorization": f"Bearer {token}"})
    return resp.status_code == 200


def _cookie(page: Page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "coordinator_local")


def _no_secret_left(server: LiveServer, secrets: list[str]) -> None:
    """No token, proof, cookie or password in the database (receipts, events, any row) or the
    server's log."""
    stored = Path(server.database).read_bytes()
    for extra in (Path(server.database + "-wal"),):
        if extra.exists():
            stored += extra.read_bytes()
    log = server.log.read_bytes()
    for secret in secrets:
        assert secret.encode() not in stored
        assert secret.encode() not in log


def test_settings_charts_attention_and_ending_a_session(page: Page, server: LiveServer) -> None:
    admin = server.admin_client()  # a second session of the admin's, to be ended from the page
    pid = admin.post(
        "/api/v1/projects",
        json={"name": "shop", "repository_url": "https://git.example/shop.git"},
        headers={"Idempotency-Key": "shop"},
    ).json()["data"]["id"]
    host = server.issue_token("host-1", pid, credential_class="supervised")
    rows = [{"session_id": f"launch-{n}", "usd": 0.75 * n} for n in range(1, 4)]
    resp = httpx.post(
        f"{server.url}/api/v1/projects/{pid}/telemetry/cost-rows",
        json={"host": "build-1", "rows": rows},
        headers={"Authorization": f"Bearer {host}", "Idempotency-Key": "costs"},
    )
    assert resp.status_code == 200, resp.text

    sign_in(page, server)
    page.get_by_role("link", name="shop").click()
    page.get_by_role("link", name="Settings").click()
    page.get_by_label("Who reviews").select_option("human")
    page.get_by_label("Required checks (one a line: a name, or name, version, environment)").fill(
        "unit\nlint, 2, ci"
    )
    page.get_by_role("button", name="Save the policy").click()
    expect(page.get_by_text("The policy was saved.")).to_be_visible()
    expect(page.locator("#policy")).to_contain_text("lint (version 2, environment ci)")
    assert admin.get(f"/api/v1/projects/{pid}").json()["data"]["policy"]["review_mode"] == "human"

    page.get_by_role("link", name="shop").click()
    page.get_by_role("link", name="Cost and canaries").click()
    expect(page.get_by_role("img", name="Cost per day")).to_be_visible()
    expect(page.get_by_role("img", name="Cost per host")).to_be_visible()
    page.get_by_text("Cost per host as a table").click()
    expect(page.get_by_role("table", name="Cost per host")).to_contain_text("$4.50")

    out = server.cli("designate-digest-sender", "--project", pid, "--agent", "host-1")
    assert out.returncode == 0, out.stderr
    page.get_by_role("link", name="Attention", exact=True).first.click()
    expect(page.get_by_role("heading", name="What needs a human now")).to_be_visible()
    expect(page.locator(f'[data-project="{pid}"] .sender')).to_have_text("host-1")

    page.get_by_role("link", name="Access").click()
    ends = page.locator("#sessions").get_by_role("button", name="End admin's session")
    expect(ends).to_have_count(1)  # the API client's session; this one says "this session"
    ends.click()
    expect(ends).to_have_count(0)
    assert admin.get("/api/v1/me").status_code == 401  # the ended session is refused at once
    admin.close()
    expect(page.get_by_role("heading", name="Access")).to_be_visible()  # this one lives on


def test_a_proposal_is_approved_and_a_parked_task_put_back(page: Page, server: LiveServer) -> None:
    admin = server.admin_client()
    pid = admin.post(
        "/api/v1/projects",
        json={
            "name": "garden",
            "repository_url": "https://git.example/g.git",
            "park_after_attempts": 1,
        },
        headers={"Idempotency-Key": "garden"},
    ).json()["data"]["id"]
    hedge = admin.post(
        f"/api/v1/projects/{pid}/tasks",
        json={"title": "Prune the hedge", "acceptance_criteria": ["shorter"], "kind": "general"},
        headers={"Idempotency-Key": "hedge"},
    ).json()["data"]["task"]
    admin.close()
    sign_in(page, server)
    with Agent(server, pid) as agent:
        roses = agent.post(
            f"/api/v1/projects/{pid}/tasks",
            {"title": "Plant roses", "acceptance_criteria": ["red"]},
        )["task"]
        claimed = agent.post(
            f"/api/v1/projects/{pid}/claims", {"task_id": hedge["id"], "expected_task_revision": 1}
        )
        attempt = claimed["claim"]["attempt"]
        agent.post(
            f"/api/v1/projects/{pid}/attempts/{attempt['id']}/release",
            {"generation": attempt["generation"], "handoff": "the shears are blunt"},
        )

        # The agent's task waits on the board as a proposal until a person approves it.
        page.get_by_role("link", name="garden").click()
        proposed = page.locator('section[aria-labelledby="col-proposed"]')
        expect(proposed).to_contain_text("Plant roses")
        expect(page.locator('section[aria-labelledby="col-blocked"]')).to_contain_text("parked")
        proposed.get_by_role("link", name="Plant roses").click()
        expect(page.locator("#proposal")).to_contain_text("waits for a person's approval")
        page.get_by_role("button", name="Approve the task").click()
        _status(page, "ready")
        offer = agent.client.get(f"/api/v1/projects/{pid}/next").json()["data"]["action"]
        assert offer["task_id"] == roses["id"]  # the parked hedge is not offered

        # The parked task is on the attention page with its attempt's handoff.
        page.get_by_role("link", name="garden").click()
        page.get_by_role("link", name="Attention", exact=True).first.click()
        parked = page.locator(f'[data-project="{pid}"] .parked')
        expect(parked).to_contain_text("the shears are blunt")
        parked.get_by_role("link", name="Prune the hedge").click()
        expect(page.locator("#parked")).to_be_visible()
        page.get_by_label("Why it can go back (what you changed)").fill("sharpened the shears")
        page.get_by_role("button", name="Put the task back").click()
        _status(page, "ready")
        expect(page.locator("#parked")).to_have_count(0)
        view = agent.client.get(f"/api/v1/projects/{pid}/tasks/{hedge['id']}").json()["data"]
        assert (view["parked"], view["fruitless_attempts"]) == (False, 0)
