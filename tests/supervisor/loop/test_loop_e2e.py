"""The loop end to end in personal mode: a real coordinator, real git, real bwrap, and a
``command:`` agent that edits, commits and submits through the agent CLI inside its launch."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import httpx

from tests.client.kit import admin_get
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import SUBMITTING_AGENT, make_loop_kit


def test_a_ready_task_is_claimed_launched_and_submitted(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr
    shown = loop.show(task["id"])
    assert shown["work_status"] == "waiting_review", shown
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert beat["iteration"] == 1 and "Launched" in beat["outcome"] and "launch" not in beat
    [final] = loop.records("finished")
    assert final["task"] == task["id"] and final["pid"] and final["released"] is True
    assert final["outcome"] == "left as it is (submitted)"
    assert loop.records() == [] and loop.leftovers() == []
    # The commit was published through the launch's candidate push helper, which is gone.
    refs = subprocess.run(
        ["git", "-C", str(loop.origin), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    [candidate] = [r for r in refs if r.startswith("refs/agent-coordinator/candidates/")]
    ref, revision = candidate.split()
    assert ref == f"refs/agent-coordinator/candidates/{task['id']}/{final['launch_id']}"
    submission = loop.submission(task["id"])
    assert submission["candidate_ref"] == ref and submission["candidate_revision"] == revision
    # The loop recorded the submission's patch (decision D45) from the two revisions.
    patch = admin_get(
        loop.admin,
        f"/api/v1/projects/{loop.project}/attempts/{submission['attempt_id']}/artifacts/patch",
    )
    assert patch["submission_id"] == submission["id"]
    assert patch["candidate_revision"] == revision
    assert patch["base_revision"] == submission["base_revision"]
    assert patch["files"] == [
        {"path": "greeting.txt", "old_path": None, "status": "added", "added": 1, "removed": 0}
    ]
    raw = subprocess.run(
        ["git", "-C", str(loop.origin), "diff-tree", "-r", "-z", "--no-renames"]
        + [submission["base_revision"], revision],
        capture_output=True,
        check=True,
    ).stdout
    assert patch["reviewed_diff"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert "+hi" in patch["patch"]
    assert "recorded the patch (1 files)" in result.stderr, result.stderr
    push_dir = loop.state / "push"
    assert [p.name for p in push_dir.iterdir() if not p.name.startswith(".")] == []
