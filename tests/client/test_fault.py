"""Lost answers: the server committed, the CLI never read the answer; `retry` recovers it."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.client.kit import (
    DroppingProxy,
    Workspace,
    admin_get,
    admin_project,
    git,
    issue_token,
    make_clone,
    workspace,
)
from tests.kit.live import LiveServer


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
    pid = admin_project(admin, admit_agent_tasks=True)
    w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "faulty", pid))
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
    pid = admin_project(admin, admit_agent_tasks=True)
    w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "patient", pid))
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


def _sessions_of(server: LiveServer, agent: str) -> list[str]:
    """The agent's sessions, read from the coordinator's database (there is no list route)."""
    uri = Path(server.database).resolve().as_uri() + "?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        rows = db.execute(
            "SELECT s.id FROM agent_sessions s JOIN principals p ON p.id = s.principal_id "
            "WHERE p.name = ?",
            (agent,),
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_lost_connect_answer_is_recovered_by_retry(
    server: LiveServer, admin: httpx.Client, proxy: DroppingProxy, tmp_path: Path
) -> None:
    """The client makes the session id and proof and journals them first, so a lost connect
    answer loses nothing: retry replays it and the same (only) session is stored."""
    pid = admin_project(admin, admit_agent_tasks=True)
    w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "unlucky", pid))
    proxy.drop = True
    lost = w.run("connect", "--workstation", "ws-1")
    proxy.drop = False
    assert proxy.dropped >= 1
    assert lost.returncode == 7 and "Traceback" not in lost.stderr
    status = w.ok("status")
    assert status["pending"]["op"] == "connect" and status["session_id"] is None
    journal = json.loads((w.state_dir / "sessions" / "default.json").read_text())["pending"]
    sid = journal["body"]["session_id"]
    # The server did open it, with the journaled id.
    assert _sessions_of(server, "unlucky") == [sid]

    recovered = w.ok("retry")
    assert recovered["session_id"] == sid and recovered["agent"] == "unlucky"
    assert "proof" not in recovered
    status = w.ok("status")
    assert status["pending"] is None and status["session_id"] == sid
    assert status["agent"] == "unlucky" and status["workstation_id"] == "ws-1"
    assert _sessions_of(server, "unlucky") == [sid]
    # The recovered session works: reads and writes carry it.
    assert w.ok("connect")["reused"] is True
    task = _task(w)
    claimed = w.ok("claim", "--task", str(task["id"]))
    assert claimed["claim"]["attempt"]["session_id"] == sid
    assert _sessions_of(server, "unlucky") == [sid]


def test_lost_checkout_registration_is_recovered_by_retry(
    server: LiveServer, admin: httpx.Client, proxy: DroppingProxy, tmp_path: Path
) -> None:
    pid = admin_project(admin, review_mode="none", admit_agent_tasks=True)
    _origin, clone = make_clone(tmp_path)
    w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "checker", pid), repo=clone)
    w.ok("connect", "--workstation", "ws-9")
    task = _task(w)
    attempt = w.ok("claim", "--task", str(task["id"]))["claim"]["attempt"]
    base = git(clone, "rev-parse", "HEAD")

    proxy.drop = True
    lost = w.run("worktree", "prepare", "--source", str(clone))
    proxy.drop = False
    assert lost.returncode == 7 and "Traceback" not in lost.stderr
    local = w.ok("status")["worktrees"][attempt["id"]]
    assert local["registered"] is False and Path(local["path"]).is_dir()
    assert w.ok("status")["pending"]["op"] == "checkout"

    w.ok("retry")
    local = w.ok("status")["worktrees"][attempt["id"]]
    assert local["registered"] is True
    detail = admin_get(admin, f"/api/v1/projects/{pid}/attempts/{attempt['id']}")
    assert detail["checkout"]["path"] == local["path"]
    assert detail["checkout"]["branch"] == local["branch"]
    assert detail["checkout"]["base_revision"] == base
    assert detail["checkout"]["workstation_id"] == "ws-9"
    again = w.run("worktree", "prepare", "--source", str(clone))
    assert again.returncode == 5 and "already prepared" in again.stderr
    kinds = [e["kind"] for e in admin_get(admin, f"/api/v1/projects/{pid}/events")["items"]]
    assert kinds.count("checkout.registered") == 1

    # A submission naming another base is refused; the default uses the registered one.
    wt = Path(local["path"])
    (wt / "x.txt").write_text("x\n")
    git(wt, "add", "x.txt")
    git(wt, "commit", "--quiet", "-m", "x")
    evidence = {"summary": "s", "acceptance_evidence": [{"criterion": "done", "evidence": "e"}]}
    wrong = w.run(
        "submissions", "code", "--input",
        w.file("wrong.json", {**evidence, "base_revision": git(wt, "rev-parse", "HEAD")}),
    )  # fmt: skip
    assert wrong.returncode == 5 and "base_revision_mismatch" in wrong.stderr
    sub = w.ok("submissions", "code", "--input", w.file("s.json", evidence))
    assert sub["submission"]["base_revision"] == base


def test_held_attempts_come_from_the_coordinator(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
) -> None:
    """A claim the local state does not know about (a raw request here) is found through the
    session's held_attempts: `session show` lists it and renew/checkpoint/release use it."""
    pid = admin_project(admin, admit_agent_tasks=True)
    w = workspace(tmp_path / "w", server.url, pid, issue_token(admin, "forgetful", pid))
    sid = w.ok("connect")["session_id"]
    assert w.ok("session", "show")["held_attempts"] == []
    first, second, third = _task(w, "one"), _task(w, "two"), _task(w, "three")
    claims = f"/api/v1/projects/{pid}/claims"
    body = w.file("c.json", {"task_id": first["id"], "expected_task_revision": 1})
    attempt = w.ok("request", "--method", "POST", "--path", claims, "--input", body)
    attempt = attempt["claim"]["attempt"]
    assert w.ok("status")["attempt"] is None

    shown = w.ok("session", "show")
    assert shown["session_id"] == sid and shown["agent"] == "forgetful"
    assert [(h["attempt_id"], h["project_id"], h["task_id"], h["generation"])
            for h in shown["held_attempts"]] == [(attempt["id"], pid, first["id"], 1)]  # fmt: skip
    human = w.run("session", "show")
    assert human.returncode == 0 and attempt["id"] in human.stdout

    assert w.ok("renew")["attempt"]["id"] == attempt["id"]
    assert w.ok("status")["attempt"]["id"] == attempt["id"]  # remembered from now on
    assert w.ok("checkpoint", "--summary", "half")["attempt"]["id"] == attempt["id"]
    assert w.ok("release", "--handoff", "later")["attempt"]["state"] == "released"
    assert w.ok("session", "show")["held_attempts"] == []
    assert w.ok("status")["attempt"] is None

    # Two held attempts and no local one: the client asks which. (The first task backs off
    # after its release without a submission: the other two are claimed.)
    for task in (second, third):
        revision = admin_get(admin, f"/api/v1/projects/{pid}/tasks/{task['id']}")["revision"]
        body = w.file("c.json", {"task_id": task["id"], "expected_task_revision": revision})
        w.ok("request", "--method", "POST", "--path", claims, "--input", body)
    several = w.run("renew")
    assert several.returncode == 2 and "--attempt" in several.stderr
    assert len(w.ok("session", "show")["held_attempts"]) == 2
