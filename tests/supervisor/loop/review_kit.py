"""Test kit for reviews in the loop: the loop runs as an unprivileged account (a reviewer's
nested candidate sandbox cannot start under a root launcher), a ``command:`` reviewer written
in Python, and a submission made through the agent CLI by another principal, its candidate
pushed to the origin at ``refs/agent-coordinator/candidates/<attempt>``."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.client.kit import admin_get, git, issue_token, workspace, write_credentials
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import SUBMITTING_AGENT, LoopKit, make_loop_kit

# A command: reviewer (the operator's own program): it reads the criteria from its prompt, runs
# the candidate's test only through $AGENTC_CANDIDATE_SHELL with the output captured, and
# prints its verdict as its last stdout line. MODE: honest (approve when the test passes, else
# request changes, its finding on FAILING_TEST's line 2), no-evidence (an approval without
# criteria evidence), hang.
REVIEWER = """#!/usr/bin/python3
import json, os, subprocess, sys, time

MODE = "@MODE@"
prompt = sys.stdin.read()
print(json.dumps({"type": "reviewer", "step": "start"}), flush=True)
if MODE == "hang":
    time.sleep(600)
data = json.loads(prompt.split("<review-data>")[1].split("</review-data>")[0])
run = os.path.dirname(os.environ["TMPDIR"])
test = subprocess.run(
    [os.environ["AGENTC_CANDIDATE_SHELL"], "-c", "sh ./test.sh"],
    stdin=subprocess.DEVNULL, capture_output=True, text=True,
)
with open(os.path.join(run, "events.jsonl")) as handle:
    forged = handle.read().count("FORGED")
report = " ".join(test.stdout.split()) + " " + " ".join(test.stderr.split())
evidence = f"test.sh exited {test.returncode}: {report.strip()}; forged events: {forged}"
passed = test.returncode == 0
verdict = {
    "decision": "approve" if passed else "request_changes",
    "summary": evidence,
    "findings": [] if passed else [{
        "remedy": "test.sh fails: " + report.strip()[:500],
        "path": "test.sh", "line": 2, "end_line": None,
    }],
    "criteria_evidence": [
        {"criterion": c, "evidence": evidence} for c in data["acceptance_criteria"]
    ] if MODE == "honest" else [],
    "amendment_decision": None,
}
print(json.dumps(verdict), flush=True)
"""
PASSING_TEST = 'test -f greeting.txt && echo "greeting.txt is there"\n'
FAILING_TEST = 'echo "greeting.txt is missing" >&2\nexit 1\n'


def safe_git(root: Path) -> dict[str, str]:
    """The test's own git runs trust every directory (the origin belongs to the loop's
    account); a global config file, which git keeps for its local transport's upload-pack."""
    path = root / "gitconfig"
    path.write_text("[safe]\n\tdirectory = *\n")
    return {"GIT_CONFIG_GLOBAL": str(path)}


def reviewer_script(loop: LoopKit, mode: str) -> None:
    path = loop.state.parent.parent / "reviewer" / "review.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(REVIEWER.replace("@MODE@", mode))
    os.chmod(path, 0o755)  # noqa: S103 - the reviewer must be executable
    loop.run.update(reviewer=True, reviewer_harness=f"command:{path}")
    loop.write_config()


def make_review_kit(
    root: Path,
    live: LiveServer,
    admin: httpx.Client,
    user: str,
    mode: str | None = "honest",
    **top: Any,
) -> LoopKit:
    """A loop taking reviews, as ``user``, with its own reviewer credential and the
    ``command:`` reviewer in ``mode`` (None: none); implementer claims are held off by the
    implementer's daily cap (a ledger row), so a task sent back stays ready."""
    loop = make_loop_kit(root, live, admin, SUBMITTING_AGENT, user=user, **top)
    reviewer = issue_token(admin, f"rev-{uuid.uuid4().hex[:6]}", loop.project, "supervised")
    creds = write_credentials(loop.state / "rev/coordinator", live.url, reviewer)
    subprocess.run(["chown", "-R", f"{user}:{user}", str(creds.parent)], check=True)
    spend(loop, "impl", 1000.0)
    if mode is not None:
        reviewer_script(loop, mode)
    return loop


def spend(loop: LoopKit, role: str, usd: float) -> None:
    """A ledger row (without a launch: never reported) charging ``usd`` to ``role`` now."""
    ledger = loop.top.get("health", {}).get("ledger") or loop.state / "gateway/ledger.jsonl"
    ledger = Path(ledger)
    ledger.parent.mkdir(exist_ok=True)
    row = {"role": role, "usd": usd, "at_ms": int(time.time() * 1000)}
    with ledger.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def submit(
    loop: LoopKit, test_sh: str, files: dict[str, str] | None = None, *, push: bool = True
) -> dict[str, Any]:
    """A task created and submitted by another principal through the agent CLI, its candidate
    (the commit adding ``test.sh`` and ``files``) pushed to the origin (``push``: else the
    submission names a candidate ref nobody published)."""
    assert loop.clone is not None
    name = f"w-{uuid.uuid4().hex[:6]}"
    root = loop.state.parent.parent / name
    worker = workspace(
        root, loop.live.url, loop.project, issue_token(loop.admin, name, loop.project), loop.clone
    )
    worker.env = safe_git(root)
    worker.ok("connect", "--harness", "test-harness")
    task = loop.task()
    worker.ok("claim", "--task", task["id"])
    prepared = worker.ok("worktree", "prepare", "--source", str(loop.clone), "--base", "HEAD")
    tree = Path(prepared["path"])
    for file, text in {"test.sh": test_sh, **(files or {})}.items():
        (tree / file).write_text(text)
        git(tree, "add", file)
    git(tree, "commit", "--quiet", "-m", "greeting")
    evidence = [{"criterion": "greeting exists", "evidence": "greeting.txt"}]
    body = {"summary": "greeting added", "acceptance_evidence": evidence}
    pushing = ("--push", "origin") if push else ()
    sub = worker.ok("submissions", "code", *pushing, "--input", worker.file("sub.json", body))
    return {"task": task, "submission": sub["submission"]}


def workflow(loop: LoopKit, task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = admin_get(
        loop.admin, f"/api/v1/projects/{loop.project}/tasks/{task_id}/workflow"
    )
    return data


def review_activity(loop: LoopKit, task_id: str) -> dict[str, Any]:
    activities: list[dict[str, Any]] = workflow(loop, task_id)["activities"]
    [activity] = [a for a in activities if a["kind"] != "integration"]
    return activity


def mirror_branches(loop: LoopKit) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(loop.state / "mirror.git"), "for-each-ref", "--format=%(refname)"],
        capture_output=True,
        text=True,
        env={**os.environ, **safe_git(loop.state.parent.parent)},
        check=True,
    )
    return [r for r in out.stdout.split() if "agentc-review" in r]
