"""Lost answers: the server committed, the CLI never read the answer; `retry` recovers it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.client.helpers import (
    DroppingProxy,
    Workspace,
    admin_get,
    admin_project,
    issue_token,
    workspace,
)
from tests.live import LiveServer


@pytest.fixture
def proxy(server: LiveServer) -> Iterator[DroppingProxy]:
    port = int(server.url.rsplit(":", 1)[1])
    p = DroppingProxy(port)
    yield p
    p.close()


def _work_attempts(admin: httpx.Client, pid: str, task_id: str) -> list[dict[str, object]]:
    detail = admin_get(admin, f"/api/v1/projects/{pid}/tasks/{task_id}")
    return [a for a in detail["attempts"] if a["activity_id"] is None]


def _task(w: Workspace, title: str = "t") -> dict[str, object]:
    data = w.ok(
        "tasks",
        "create",
        "--input",
        "-",
        stdin=json.dumps({"title": title, "acceptance_criteria": ["done"]}),
    )
    task: dict[str, object] = data["task"]
    return task


def test_lost_claim_answer_is_recovered_by_retry(
    server: LiveServer, admin: httpx.Client, proxy: DroppingProxy, tmp_path: Path
) -> None:
    pid = admin_project(admin)
    w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "faulty"))
    w.ok("connect")
    task = _task(w)

    proxy.drop = True
    lost = w.run("claim", "--task", str(task["id"]), "--revision", "1")
    proxy.drop = False
    assert proxy.dropped >= 1
    assert lost.returncode == 7, lost.stderr
    assert "transport_failed" in lost.stderr and "Traceback" not in lost.stderr

    # The server did commit the claim; the CLI only knows its request is pending.
    committed = _work_attempts(admin, pid, str(task["id"]))
    assert len(committed) == 1
    pending = w.ok("status")["pending"]
    assert pending["method"] == "POST" and pending["path"].endswith("/claims")
    assert w.ok("status")["attempt"] is None

    # No new mutation while one is unresolved: exit 7 and a message naming `retry`.
    blocked = w.run(
        "tasks",
        "create",
        "--input",
        w.file("t2.json", {"title": "other", "acceptance_criteria": ["x"]}),
    )
    assert blocked.returncode == 7
    assert "mutation_pending" in blocked.stderr and "retry" in blocked.stderr
    # Reads still work.
    assert w.ok("tasks", "show", "--id", str(task["id"]))["work_status"] == "in_progress"

    recovered = w.ok("retry")
    assert recovered["claim"]["attempt"]["id"] == committed[0]["id"]
    assert len(_work_attempts(admin, pid, str(task["id"]))) == 1
    status = w.ok("status")
    assert status["pending"] is None
    assert status["attempt"]["id"] == committed[0]["id"]
    # The recovered attempt is usable, and a second retry has nothing to do.
    assert w.ok("renew")["attempt"]["id"] == committed[0]["id"]
    assert w.ok("retry")["retried"] is None
    kinds = [e["kind"] for e in admin_get(admin, f"/api/v1/projects/{pid}/events")["items"]]
    assert kinds.count("attempt.claimed") == 1


def test_request_that_never_arrived_is_sent_by_retry(
    server: LiveServer, admin: httpx.Client, proxy: DroppingProxy, tmp_path: Path
) -> None:
    pid = admin_project(admin)
    w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "patient"))
    w.ok("connect")
    task = _task(w)
    proxy.refuse = True
    out = w.run("claim", "--task", str(task["id"]), "--revision", "1", "--json")
    assert out.returncode == 7
    assert json.loads(out.stdout)["error"]["code"] == "transport_failed"
    assert _work_attempts(admin, pid, str(task["id"])) == []
    key = w.ok("status")["pending"]["idempotency_key"]
    again = w.run("retry")  # still down: still pending, same key
    assert again.returncode == 7
    assert w.ok("status")["pending"]["idempotency_key"] == key
    proxy.refuse = False
    claimed = w.ok("retry")
    assert [a["id"] for a in _work_attempts(admin, pid, str(task["id"]))] == [
        claimed["claim"]["attempt"]["id"]
    ]


def test_lost_session_answer_says_connect_again(
    server: LiveServer, admin: httpx.Client, proxy: DroppingProxy, tmp_path: Path
) -> None:
    """The API returns a session's proof only once, so a lost connect answer cannot be
    recovered: retry says so (exit 5), and connect opens a new session."""
    pid = admin_project(admin)
    w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "unlucky"))
    proxy.drop = True
    assert w.run("connect").returncode == 7
    proxy.drop = False
    lost = w.run("retry")
    assert lost.returncode == 5 and "session_proof_lost" in lost.stderr
    assert w.ok("status")["pending"] is None
    assert w.ok("connect")["session_id"]
    assert w.ok("status")["session_id"]
