"""Screenshots of the console's main pages into docs/screenshots/ (run by scripts/screenshots):
a real server on a scratch database, a little real work done through the API, Debian's
Chromium at 1280 px and at phone width."""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server
from tests.service.console.kit import CHROMIUM, Agent
from tests.service.console.screen_change import amended_change, code_change

OUT = Path(__file__).resolve().parents[3] / "docs" / "screenshots"


def seed(live: LiveServer) -> tuple[str, str, str]:
    """A project with tasks in several states; returns the project, a task waiting review and
    the task an agent is working on."""
    admin = live.admin_client()
    pid = admin.post(
        "/api/v1/projects",
        json={
            "name": "website",
            "repository_url": "https://git.example/website.git",
            "review_mode": "human",
        },
        headers={"Idempotency-Key": "seed-project"},
    ).json()["data"]["id"]
    titles = [
        "Fix the login redirect",
        "Write the 1.0 release notes",
        "Add a dark theme",
        "Translate the footer",
        "Compress the hero image",
    ]
    ids = []
    for n, title in enumerate(titles):
        body = {
            "title": title,
            "kind": "general",
            "priority": n % 4,
            "acceptance_criteria": ["works on a phone", "documented"],
            "description": "Reported by three users this week.",
        }
        ids.append(
            admin.post(
                f"/api/v1/projects/{pid}/tasks", json=body, headers={"Idempotency-Key": f"seed-{n}"}
            ).json()["data"]["task"]["id"]
        )
    admin.patch(
        f"/api/v1/projects/{pid}/policy",
        json={
            "expected_revision": 1,
            "required_checks": [{"identity": "unit"}, {"identity": "lint"}],
        },
        headers={"Idempotency-Key": "seed-policy"},
    )
    admin.close()
    with Agent(live, pid, "claude-worker", credential_class="supervised") as agent:
        _work(agent, pid, ids)
    _telemetry(live, pid, ids)
    live.cli("designate-digest-sender", "--project", pid, "--agent", "claude-worker")
    return pid, ids[1], ids[0]


def _outcome(days_ago: int, harness: str) -> str:
    if days_ago in (4, 11) or (days_ago == 0 and harness == "codex"):
        return "fail"
    return "pass"


def _telemetry(live: LiveServer, pid: str, ids: list[str]) -> None:
    """Three weeks of cost rows from two hosts, and canary results with two failures."""
    day = 24 * 3600 * 1000
    now = int(time.time() * 1000)
    pick = random.Random(7)
    costs = [
        {
            "session_id": f"launch-{n}",
            "task_id": ids[n % 3],
            "usd": round(pick.uniform(0.2, 3.5), 2),
            "occurred_at_ms": now - pick.randrange(21) * day,
        }
        for n in range(40)
    ]
    canaries = [
        {"harness": harness, "outcome": _outcome(n, harness), "at_ms": now - n * day}
        for n in range(14)
        for harness in ("claude", "codex")
    ]
    for who, cls, stream, host, rows in (
        ("host-a", "supervised", "cost-rows", "build-1", costs[:25]),
        ("host-b", "supervised", "cost-rows", "build-2", costs[25:]),
        ("canary-bot", "supervised", "canary-results", "build-1", canaries),
    ):
        token = live.issue_token(who, pid, credential_class=cls)
        resp = httpx.post(
            f"{live.url}/api/v1/projects/{pid}/telemetry/{stream}",
            json={"host": host, "rows": rows},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": f"seed-{who}"},
        )
        resp.raise_for_status()


def _work(agent: Agent, pid: str, ids: list[str]) -> None:
    """Task 0 in progress, task 1 submitted for review, task 3 blocked with a handoff."""
    for n in (0, 1, 3):
        got = agent.client.get(f"/api/v1/projects/{pid}/tasks/{ids[n]}").json()["data"]
        att = agent.post(
            f"/api/v1/projects/{pid}/claims",
            {"task_id": ids[n], "expected_task_revision": got["revision"]},
        )["claim"]["attempt"]
        agent.post(
            f"/api/v1/projects/{pid}/attempts/{att['id']}/checkpoints",
            {"generation": att["generation"], "summary": "reproduced; fixing"},
        )
        if n == 0:  # the board marks it, the task page says what it is doing now
            agent.post(
                f"/api/v1/projects/{pid}/attempts/{att['id']}/renew",
                {"generation": att["generation"], "step": "Bash: pytest tests/test_login.py -q"},
            )
        if n == 3:
            agent.post(
                f"/api/v1/projects/{pid}/attempts/{att['id']}/release",
                {
                    "generation": att["generation"],
                    "handoff": "The translations need the legal team's wording; asked in #legal.",
                    "blocked": True,
                },
            )
        if n == 1:
            agent.post(
                f"/api/v1/projects/{pid}/attempts/{att['id']}/submissions",
                {
                    "generation": att["generation"],
                    "kind": "general",
                    "summary": "Notes written in NOTES.md.",
                    "acceptance_evidence": [
                        {"criterion": "works on a phone", "evidence": "checked at 390 px"},
                        {"criterion": "documented", "evidence": "NOTES.md section 1.0"},
                    ],
                },
            )


ONLY = set(sys.argv[1:])  # names given: only those screenshots are taken


def shoot(page: Page, live: LiveServer, path: str, name: str, part: str | None = None) -> None:
    """The page at path, whole, or only its first element matching the selector ``part``."""
    page.goto(live.url + path)
    page.wait_for_load_state("networkidle")
    if ONLY and name not in ONLY:
        return
    if part:
        page.locator(part).first.screenshot(path=str(OUT / f"{name}.png"))
    else:
        page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
    print(f"docs/screenshots/{name}.png", file=sys.stderr)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="agentc-screens-"))
    canary = ("--canary-principals", "canary-bot")
    with live_server(str(work / "c.sqlite3"), work, *canary) as live, sync_playwright() as pw:
        pid, review, working = seed(live)
        change, steps = code_change(live, work / "repo")
        amended = amended_change(live, work / "amended")
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        for width, suffix in ((1280, ""), (390, "-phone")):
            page = browser.new_page(viewport={"width": width, "height": 800})
            shoot(page, live, "/console/sign-in", "sign-in" + suffix)
            page.get_by_label("Name").fill("admin")
            page.get_by_label("Password").fill(ADMIN_PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url("**/console/projects")
            shoot(page, live, f"/console/projects/{pid}", "board" + suffix)
            shoot(page, live, f"/console/projects/{pid}/tasks/{review}", "task-review" + suffix)
            page.set_viewport_size({"width": width, "height": 1600})  # the review form is
            shoot(page, live, change, "change" + suffix)  # sticky, 96% of the window's height
            page.set_viewport_size({"width": width, "height": 800})
            shoot(page, live, f"/console/projects/{pid}/costs", "costs" + suffix)
            shoot(page, live, "/console/attention", "attention" + suffix)
            if not suffix:
                shoot(page, live, "/console/projects", "projects")
                shoot(page, live, f"/console/projects/{pid}/tasks/new", "new-task")
                shoot(page, live, "/console/access", "access")
                shoot(page, live, f"/console/projects/{pid}/settings", "settings")
                shoot(page, live, "/console/account", "account")
                page.set_viewport_size({"width": width, "height": 1600})
                shoot(page, live, change + "?view=split", "change-split")
                page.set_viewport_size({"width": width, "height": 800})
                shoot(page, live, steps, "steps", "article.run")
                shoot(page, live, amended, "change-since", "#since-review")
                board = f"/console/projects/{pid}"
                shoot(page, live, board, "board-live", "li.task-card:has(.working)")
                shoot(page, live, f"{board}/tasks/{working}", "task-live", "table:has(.working)")
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
