"""The whole agent loop through the real `agent-coordinator` CLI against a real server, on both
database backends: connect, next, claim, checkpoint, worktree, submit code, review, decide."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.client.kit import admin_get, admin_project, git, issue_token, make_clone, workspace
from tests.kit.live import LiveServer


def test_agent_loop_through_the_cli(live: LiveServer, tmp_path: Path) -> None:
    admin = live.admin_client()
    try:
        _loop(live, admin, tmp_path)
    finally:
        admin.close()


def _loop(live: LiveServer, admin: httpx.Client, tmp_path: Path) -> None:
    pid = admin_project(admin, review_mode="agent", admit_agent_tasks=True)
    origin, clone = make_clone(tmp_path)
    worker = workspace(
        tmp_path / "worker", live.url, pid, issue_token(admin, "worker", pid), repo=clone
    )
    reviewer = workspace(
        tmp_path / "reviewer", live.url, pid, issue_token(admin, "reviewer", pid), repo=clone
    )

    # One run of the installed console script; the rest run the same CLI in-process (fast).
    first = worker.run("connect", "--harness", "test-harness", "--json", subprocess_=True)
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)
    assert session["session_id"] and "proof" not in session
    assert worker.ok("connect")["reused"] is True  # a second connect keeps the session

    task = worker.ok(
        "tasks",
        "create",
        "--input",
        "-",
        stdin=json.dumps(
            {"title": "add a greeting", "acceptance_criteria": ["greeting exists", "tests pass"]}
        ),
    )
    task = task["task"]
    assert task["work_status"] == "ready"
    listed = worker.ok("tasks", "list")
    assert [t["id"] for t in listed["items"]] == [task["id"]]

    nxt = worker.ok("next")
    assert nxt["action"]["task_id"] == task["id"]
    claimed = worker.ok("claim", "--task", task["id"])
    attempt = claimed["claim"]["attempt"]
    assert attempt["generation"] == 1 and attempt["session_id"] == session["session_id"]
    assert worker.ok("next")["action"] is None

    cp = worker.ok("checkpoint", "--summary", "half way", "--handoff", "write the file")
    assert cp["attempt"]["id"] == attempt["id"]
    assert worker.ok("renew")["lease_remaining_ms"] > 0

    prepared = worker.ok("worktree", "prepare", "--source", str(clone))
    wt = Path(prepared["path"])
    assert prepared["branch"] == f"agentc/{session['session_id']}"
    assert prepared["base_revision"] == git(clone, "rev-parse", "HEAD")
    assert git(wt, "rev-parse", "--abbrev-ref", "HEAD") == prepared["branch"]
    assert prepared["registered"] is True
    assert worker.ok("status")["worktrees"][attempt["id"]]["registered"] is True
    registered = admin_get(admin, f"/api/v1/projects/{pid}/attempts/{attempt['id']}")["checkout"]
    assert (registered["path"], registered["branch"], registered["base_revision"]) == (
        prepared["path"],
        prepared["branch"],
        prepared["base_revision"],
    )
    (wt / "greeting.txt").write_text("hi\n")
    git(wt, "add", "greeting.txt")
    git(wt, "commit", "--quiet", "-m", "greeting")
    head = git(wt, "rev-parse", "HEAD")

    evidence = [
        {"criterion": "greeting exists", "evidence": "greeting.txt"},
        {"criterion": "tests pass", "evidence": "no tests yet"},
    ]
    sub = worker.ok(
        "submissions",
        "code",
        "--push",
        "origin",
        "--input",
        worker.file("sub.json", {"summary": "greeting added", "acceptance_evidence": evidence}),
    )
    ref = f"refs/agent-coordinator/candidates/{attempt['id']}"
    assert sub["submission"]["candidate_ref"] == ref
    assert sub["submission"]["candidate_revision"] == head
    assert sub["submission"]["base_revision"] == prepared["base_revision"]
    assert git(origin, "rev-parse", ref) == head
    assert sub["task"]["work_status"] == "waiting_review"
    assert worker.ok("status")["attempt"] is None

    reviewer.ok("connect")
    queued = reviewer.ok("reviews", "next")
    assert queued["action"]["task_id"] == task["id"]
    rc = reviewer.ok("reviews", "claim")
    assert rc["submission"]["id"] == sub["submission"]["id"]
    assert reviewer.ok("status")["review"]["activity_id"] == rc["activity"]["id"]
    # Given back undecided (the loop does this when its reviewer posts no verdict), then
    # claimed again.
    released = reviewer.ok("reviews", "release", "--summary", "no verdict this time")
    assert released["activity"]["state"] == "queued"
    assert reviewer.ok("status")["review"] is None
    rc = reviewer.ok("reviews", "claim")
    assert rc["attempt"]["generation"] == 2
    decided = reviewer.ok(
        "reviews",
        "decide",
        "--input",
        "-",
        stdin=json.dumps(
            {
                "decision": "approved",
                "summary": "looks right",
                "findings": [{"severity": "advisory", "remedy": "say hello too"}],
            }
        ),
    )
    assert decided["review"]["decision"] == "approved"
    assert decided["task"]["work_status"] == "waiting_integration"

    shown = worker.ok("tasks", "show", "--id", task["id"])
    assert shown["work_status"] == "waiting_integration"
    kinds = [e["kind"] for e in admin_get(admin, f"/api/v1/projects/{pid}/events")["items"]]
    for kind in (
        "attempt.claimed",
        "attempt.checkpointed",
        "attempt.renewed",
        "submission.created",
        "workflow_activity.claimed",
        "review.decided",
    ):
        assert kind in kinds

    # Human output is a table, not JSON, and says the same thing.
    human = worker.run("tasks", "show", "--id", task["id"])
    assert human.returncode == 0 and "waiting_integration" in human.stdout
    # The attempt is gone: releasing it is a conflict (exit 5), never a traceback.
    gone = worker.run(
        "release", "--handoff", "done", "--attempt", attempt["id"], "--generation", "1"
    )
    assert gone.returncode == 5 and "lease_expired" in gone.stderr
    assert "Traceback" not in gone.stderr
