"""The screenshots' code change (scripts/screenshots): a second project, reviewed by an agent and
a person, whose task an agent changed in a real git repository; the supervisor's records of it
(the patch of its two revisions, the attempt's run) and an agent reviewer's finding on a line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentc.supervisor.loop.patch import of_revisions
from tests.kit.changes import git
from tests.kit.live import LiveServer
from tests.service.console.kit import Agent

LOGIN = '''"""Sign-in views."""

from app.http import redirect, render
from app.users import check_password


def sign_in(request):
    if request.method == "GET":
        return render("sign_in.html")
    user = check_password(request.form["name"], request.form["password"])
    if user is None:
        return render("sign_in.html", error="Wrong name or password")
    request.session["user"] = user.id
    return redirect("/")
'''
FIXED = LOGIN.replace(
    """    request.session["user"] = user.id
    return redirect("/")
""",
    '''    request.session["user"] = user.id
    return redirect(safe_next(request.args.get("next")))


def safe_next(target):
    """The page asked for before signing in, if it is one of ours; else the home page."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target
''',
)
TEST = """from app.login import safe_next


def test_next_is_kept():
    assert safe_next("/billing?tab=2") == "/billing?tab=2"


def test_other_sites_are_refused():
    assert safe_next("//evil.example") == "/"
    assert safe_next("https://evil.example") == "/"
"""
CRITERIA = ["after sign-in the person lands on the page they asked for", "no open redirect"]
STEPS = [
    ("model", "message", "I will read the sign-in view first.", None),
    ("tool", "Read", "app/login.py", True),
    ("tool", "Bash", "grep -rn 'next' app/", True),
    ("file", "Edit", "app/login.py", True),
    ("file", "Write", "tests/test_login.py", True),
    ("tool", "Bash", "pytest tests/test_login.py -q", False),
    ("file", "Edit", "app/login.py", True),
    ("tool", "Bash", "pytest -q", True),
    ("tool", "Bash", "git commit -am 'Keep the next page after sign-in'", True),
    ("model", "message", "Both criteria hold; submitting.", None),
]


def _repo(repo: Path) -> tuple[str, str]:
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "app").mkdir()
    (repo / "app/login.py").write_text(LOGIN)
    (repo / "docs").mkdir()
    (repo / "docs/LOGIN.md").write_text("# Signing in\n\nName and password.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "app/login.py").write_text(FIXED)
    (repo / "tests").mkdir()
    (repo / "tests/test_login.py").write_text(TEST)
    git(repo, "mv", "docs/LOGIN.md", "docs/sign-in.md")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "candidate")
    return base, git(repo, "rev-parse", "HEAD")


def _run() -> dict[str, Any]:
    return {
        "harness": "claude",
        "model": "claude-sonnet",
        "steps": [
            {"kind": kind, "name": name, "detail": detail, "ok": ok}
            for kind, name, detail, ok in STEPS
        ],
        "ending": "submitted",
        "why": "the agent submitted its work; the launch exited with code 0",
        "started_at_ms": 1_800_000_000_000,
        "duration_ms": 412_000,
        "usd": 0.83,
        "usd_estimated": False,
        "input_tokens": 184_000,
        "cached_input_tokens": 121_000,
        "output_tokens": 6_400,
    }


def code_change(live: LiveServer, repo: Path) -> tuple[str, str]:
    """The change page's and the task page's paths."""
    base, candidate = _repo(repo)
    admin = live.admin_client()
    pid = admin.post(
        "/api/v1/projects",
        json={
            "name": "shop",
            "repository_url": "https://git.example/shop.git",
            "review_mode": "both",
        },
        headers={"Idempotency-Key": "screens-shop"},
    ).json()["data"]["id"]
    task = admin.post(
        f"/api/v1/projects/{pid}/tasks",
        json={
            "title": "Keep the page asked for after sign-in",
            "kind": "code",
            "acceptance_criteria": CRITERIA,
        },
        headers={"Idempotency-Key": "screens-shop-task"},
    ).json()["data"]["task"]
    admin.close()
    with Agent(live, pid, "claude-shop", credential_class="supervised") as agent:
        attempt = agent.post(
            f"/api/v1/projects/{pid}/claims", {"task_id": task["id"], "expected_task_revision": 1}
        )["claim"]["attempt"]
        at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
        evidence = [
            "redirect(safe_next(...)) after a good password",
            "test_other_sites_are_refused",
        ]
        sub = agent.post(
            f"{at}/submissions",
            {
                "generation": attempt["generation"],
                "kind": "code",
                "summary": "Sign-in keeps ?next= when it is a path of ours.",
                "acceptance_evidence": [
                    {"criterion": c, "evidence": e} for c, e in zip(CRITERIA, evidence, strict=True)
                ],
                "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/l1",
                "candidate_revision": candidate,
                "base_revision": base,
            },
        )["submission"]
        patch = of_revisions(repo, base, candidate, 1 << 20)
        agent.post(f"{at}/artifacts/patch", {**patch, "submission_id": sub["id"]})
        agent.post(f"{at}/artifacts/steps", _run())
    _agent_review(live, pid, task["id"], sub["id"])
    page = f"/console/projects/{pid}/tasks/{task['id']}"
    return f"{page}/submissions/{sub['id']}", page


def _agent_review(
    live: LiveServer,
    pid: str,
    task_id: str,
    sub_id: str,
    decision: str = "approved",
    remedy: str = "A backslash path (/\\\\evil.example) is also another site in some browsers.",
    line: int = 19,
    summary: str = "The redirect is kept and checked; tests pass.",
) -> None:
    with Agent(live, pid, "codex-reviewer") as reviewer:
        flow = reviewer.client.get(f"/api/v1/projects/{pid}/tasks/{task_id}/workflow")
        act = next(a for a in flow.json()["data"]["activities"] if a["kind"] == "agent_review")
        at = f"/api/v1/projects/{pid}/workflow-activities/{act['id']}"
        held = reviewer.post(f"{at}/claim", {"expected_submission_id": sub_id})
        severity = "advisory" if decision == "approved" else "required"
        finding = {"severity": severity, "remedy": remedy, "path": "app/login.py", "line": line}
        reviewer.post(
            f"{at}/review",
            {
                "generation": held["attempt"]["generation"],
                "submission_id": sub_id,
                "decision": decision,
                "summary": summary,
                "findings": [finding],
            },
        )


SENT_BACK = FIXED.replace(' or target.startswith("//")', "")


def amended_change(live: LiveServer, repo: Path) -> str:
    """A task whose first change an agent reviewer sent back (``//evil.example`` is another
    site) and whose next change fixes it: the second change page's path."""
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "app").mkdir()
    (repo / "app/login.py").write_text(LOGIN)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "tests").mkdir()
    versions = []
    for text, tests in ((SENT_BACK, TEST.split("\n\n\ndef test_other")[0] + "\n"), (FIXED, TEST)):
        (repo / "app/login.py").write_text(text)
        (repo / "tests/test_login.py").write_text(tests)
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "-m", "candidate")
        versions.append(git(repo, "rev-parse", "HEAD"))
    admin = live.admin_client()
    project = {
        "name": "portal",
        "repository_url": "https://git.example/p.git",
        "review_mode": "agent",
    }
    pid = admin.post(
        "/api/v1/projects", json=project, headers={"Idempotency-Key": "screens-portal"}
    ).json()["data"]["id"]
    body = {
        "title": "Keep the page asked for after sign-in",
        "kind": "code",
        "acceptance_criteria": CRITERIA,
    }
    task = admin.post(
        f"/api/v1/projects/{pid}/tasks", json=body, headers={"Idempotency-Key": "screens-portal-t"}
    ).json()["data"]["task"]["id"]
    admin.close()
    first = _submit(live, pid, task, repo, base, versions[0], 1)
    why = "//evil.example starts with / and is another site: refuse it, and test it."
    _agent_review(live, pid, task, first, "changes_requested", why, 21, "An open redirect.")
    second = _submit(live, pid, task, repo, base, versions[1], 2)
    return f"/console/projects/{pid}/tasks/{task}/submissions/{second}"


def _submit(
    live: LiveServer, pid: str, task: str, repo: Path, base: str, candidate: str, n: int
) -> str:
    """An attempt of the task submits the candidate, and its patch is recorded."""
    with Agent(live, pid, f"claude-portal-{n}") as agent:
        fresh = agent.client.get(f"/api/v1/projects/{pid}/tasks/{task}").json()["data"]
        attempt = agent.post(
            f"/api/v1/projects/{pid}/claims",
            {"task_id": task, "expected_task_revision": fresh["revision"]},
        )["claim"]["attempt"]
        at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
        sub = agent.post(
            f"{at}/submissions",
            {
                "generation": attempt["generation"],
                "kind": "code",
                "summary": "Sign-in keeps ?next= when it is a path of ours.",
                "acceptance_evidence": [{"criterion": c, "evidence": "tests"} for c in CRITERIA],
                "candidate_ref": f"refs/agent-coordinator/candidates/{task}/l{n}",
                "candidate_revision": candidate,
                "base_revision": base,
            },
        )["submission"]
        patch = of_revisions(repo, base, candidate, 1 << 20)
        agent.post(f"{at}/artifacts/patch", {**patch, "submission_id": sub["id"]})
    return str(sub["id"])
