"""Inside a launch the agent publishes through the candidate push helper: `submissions code`
and `checkpoint --push-wip` against a real server and a real `agentc-push` process."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.client.kit import (
    Workspace,
    admin_project,
    git,
    issue_token,
    make_clone,
    workspace,
)
from tests.kit.live import LiveServer
from tests.push.kit import LAUNCH, TASK, remote_ref, start_helper

EVIDENCE = [{"criterion": "greeting exists", "evidence": "greeting.txt"}]


def claimed(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, name: str, title: str
) -> tuple[Workspace, Path, Path]:
    """A worker that connected, created a task and claimed it: (worker, origin, clone)."""
    pid = admin_project(admin, review_mode="agent", admit_agent_tasks=True)
    origin, clone = make_clone(tmp_path)
    worker = workspace(tmp_path / "w", server.url, pid, issue_token(admin, name, pid), repo=clone)
    worker.ok("connect")
    task = {"title": title, "acceptance_criteria": ["greeting exists"]}
    worker.ok("tasks", "create", "--input", "-", stdin=json.dumps(task))
    worker.ok("claim")
    return worker, origin, clone


def test_submit_and_wip_go_through_the_helper(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
) -> None:
    worker, origin, clone = claimed(server, admin, tmp_path, "pusher", "greet")
    (tmp_path / "helper").mkdir()
    helper = start_helper(tmp_path / "helper", origin)
    try:
        worker.env["AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET"] = str(helper.socket)
        wt = Path(worker.ok("worktree", "prepare", "--source", str(clone))["path"])
        (wt / "greeting.txt").write_text("hi\n")
        git(wt, "add", "greeting.txt")
        git(wt, "commit", "--quiet", "-m", "greeting")
        head = git(wt, "rev-parse", "HEAD")

        worker.ok(
            "checkpoint",
            "--summary",
            "wip",
            "--revision",
            head,
            "--push-wip",
            "--checkout",
            str(wt),
        )
        wip = f"refs/agent-coordinator/candidates/wip/{TASK}/{LAUNCH}/{head}"
        assert remote_ref(origin, wip) == head

        body = worker.file("sub.json", {"summary": "greeting", "acceptance_evidence": EVIDENCE})
        sub = worker.ok("submissions", "code", "--checkout", str(wt), "--input", body)
        ref = f"refs/agent-coordinator/candidates/{TASK}/{LAUNCH}"
        assert sub["submission"]["candidate_ref"] == ref
        assert sub["submission"]["candidate_revision"] == head
        assert remote_ref(origin, ref) == head
    finally:
        helper.stop()


def test_a_refused_candidate_exits_6_and_submits_nothing(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
) -> None:
    worker, origin, clone = claimed(server, admin, tmp_path, "leaker", "leak")
    (tmp_path / "helper").mkdir()
    helper = start_helper(tmp_path / "helper", origin)
    try:
        worker.env["AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET"] = str(helper.socket)
        wt = Path(worker.ok("worktree", "prepare", "--source", str(clone))["path"])
        armour = "-----BEGIN OPENSSH " + "PRIVATE KEY-----"  # built here: no key in the tree
        (wt / "id_ed25519").write_text(f"{armour}\nAAAA\n")
        git(wt, "add", "id_ed25519")
        git(wt, "commit", "--quiet", "-m", "oops")
        body = worker.file("sub.json", {"summary": "leak", "acceptance_evidence": EVIDENCE})
        out = worker.run("submissions", "code", "--checkout", str(wt), "--input", body, "--json")
        assert out.returncode == 6, (out.stdout, out.stderr)
        assert "id_ed25519" in out.stdout + out.stderr and "AAAA" not in out.stdout + out.stderr
        assert worker.ok("status")["attempt"] is not None  # still held: nothing was submitted
    finally:
        helper.stop()


def test_push_wip_without_the_helper_is_a_clear_error(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
) -> None:
    worker, _origin, clone = claimed(server, admin, tmp_path, "nohelper", "x")
    head = git(clone, "rev-parse", "HEAD")
    out = worker.run("checkpoint", "--summary", "s", "--revision", head, "--push-wip")
    assert out.returncode == 2
    assert "AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET is not set" in out.stderr
    relative = worker.run(
        "status", env={"AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET": "relative/push.sock"}
    )
    assert relative.returncode == 2 and "must be an absolute path" in relative.stderr
