"""The landing queue on SQLite and PostgreSQL: several workers' submissions (each its own agent,
session and reviewer, as several supervisors' would be) are implemented, submitted and approved
at once; the coordinator's queue holds them in approval order, and the real integrator lands
them in that order, each rebuilt on the target the one before moved, or sends back the one that
no longer applies, naming the conflicting path."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.kit import admin_get, git, issue_token, workspace
from tests.integrator.kit import PASS, Setup, commit, make_setup
from tests.kit.live import live_server

WORKERS = 6


def _cli(ws: Any, *args: str, stdin: str | None = None) -> Any:
    """The agent CLI as its own process (workers run side by side in threads)."""
    out = ws.run(*args, "--json", stdin=stdin, subprocess_=True)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return json.loads(out.stdout)


def _worker(s: Setup, index: int, files: dict[str, str]) -> dict[str, Any]:
    """A worker and a reviewer of their own, each connected; the task created and claimed."""
    name = f"w{index}-{uuid.uuid4().hex[:6]}"
    source = s.root / name / "source"  # its own clone (its supervisor's)
    source.parent.mkdir(parents=True)
    git(source.parent, "clone", "--quiet", str(s.origin), str(source))
    git(source, "config", "user.email", f"{name}@example.invalid")
    git(source, "config", "user.name", name)
    worker = workspace(
        s.root / name, s.url, s.project_id, issue_token(s.admin, name, s.project_id), source
    )
    reviewer = workspace(
        s.root / f"r-{name}", s.url, s.project_id, issue_token(s.admin, f"r-{name}", s.project_id)
    )
    for ws in (worker, reviewer):
        _cli(ws, "connect", "--harness", "test-harness")
    about = {"title": f"change {index}", "acceptance_criteria": ["done"]}
    made = s.admin.post(  # a person files the tasks (agents' would count against a budget)
        f"/api/v1/projects/{s.project_id}/tasks",
        json=about,
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert made.status_code == 201, made.text
    task = made.json()["data"]["task"]
    _cli(worker, "claim", "--task", task["id"])
    return {"worker": worker, "reviewer": reviewer, "task": task, "files": files, "name": name}


def _implement_and_approve(s: Setup, job: dict[str, Any]) -> None:
    worker, task = job["worker"], job["task"]
    prepared = _cli(worker, "worktree", "prepare", "--source", str(worker.repo), "--base", "HEAD")
    commit(Path(prepared["path"]), job["files"], task["title"])
    body = {
        "summary": "done",
        "acceptance_evidence": [{"criterion": "done", "evidence": "the files"}],
        "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/{job['name']}",
    }
    made = _cli(worker, "submissions", "code", "--push", "origin", "--input",
                worker.file("sub.json", body))  # fmt: skip
    sub = job["submission"] = made["submission"]
    [review] = [a for a in made["activities"] if a["kind"] == "agent_review"]
    _cli(job["reviewer"], "reviews", "claim", "--activity", review["id"], "--submission", sub["id"])
    verdict = {"decision": "approved", "summary": "read", "findings": []}
    _cli(job["reviewer"], "reviews", "decide", "--input", "-", stdin=json.dumps(verdict))


@pytest.mark.slow
def test_submissions_arriving_at_once_land_in_approval_order(database: str, tmp_path: Path) -> None:
    (tmp_path / "coordinator").mkdir()
    with live_server(database, tmp_path / "coordinator") as live:
        admin = live.admin_client()
        try:
            s = make_setup(tmp_path / "project", live.url, admin)
            s.write_config(PASS)
            # Two workers change the same line of the same file: whichever lands second conflicts.
            files = [{f"file{i}.txt": f"{i}\n"} for i in range(WORKERS - 2)]
            files += [{"shared.txt": "one\n"}, {"shared.txt": "two\n"}]
            jobs = [_worker(s, i, f) for i, f in enumerate(files)]
            threads = [
                threading.Thread(target=_implement_and_approve, args=(s, job)) for job in jobs
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=300)
            assert all("submission" in job for job in jobs), "a worker did not finish"
            _lands_in_order(s, admin, jobs)
        finally:
            admin.close()


def _lands_in_order(s: Setup, admin: httpx.Client, jobs: list[dict[str, Any]]) -> None:
    queue = admin_get(admin, f"/api/v1/projects/{s.project_id}/integration/queue")
    items = queue["items"]
    assert queue["target_branch"] == "main"
    assert sorted(i["task_id"] for i in items) == sorted(j["task"]["id"] for j in jobs)
    assert [i["position"] for i in items] == list(range(1, len(jobs) + 1))
    assert [i["approved_at"] for i in items] == sorted(i["approved_at"] for i in items)
    before = s.tip()
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    # Every task but the second of the two same-line changes landed, in the queue's order.
    order = [i["task_id"] for i in items]
    shared = [j["task"]["id"] for j in jobs if "shared.txt" in j["files"]]
    late = max(shared, key=order.index)
    landed = git(s.origin, "rev-list", "--first-parent", "--reverse", f"{before}..main")
    tasks_landed = [s.trailers(rev)["Agentc-Task"] for rev in landed.split()]
    assert tasks_landed == [t for t in order if t != late]
    back = s.landing(late)["sent_back"]
    assert back["reason_code"] == "conflict" and "shared.txt" in back["reason"]
    assert s.task(late)["work_status"] == "ready"
    assert admin_get(admin, f"/api/v1/projects/{s.project_id}/integration/queue")["items"] == []
    assert len(s.landings()) == len(jobs) - 1
