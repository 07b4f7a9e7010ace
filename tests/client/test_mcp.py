"""The MCP adapter as a real stdio subprocess, driven by the `mcp` SDK's own client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.client.kit import (
    MCP,
    DroppingProxy,
    Workspace,
    admin_get,
    admin_project,
    issue_token,
    workspace,
)
from tests.kit.live import LiveServer

TOOLS = {
    "coordinator_session_register", "coordinator_next", "coordinator_task_get",
    "coordinator_claim", "coordinator_attempt_renew", "coordinator_checkpoint",
    "coordinator_attempt_release", "coordinator_submit", "coordinator_activity_claim",
    "coordinator_review", "coordinator_transport_status", "coordinator_transport_retry",
    "coordinator_session_get",
}  # fmt: skip


async def _call(client: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call_tool(name, args or {})
    payload = result.structured_content
    assert isinstance(payload, dict), result
    assert json.loads(result.content[0].text) == payload  # type: ignore[union-attr]
    assert result.is_error == (not payload["ok"])
    return payload


def _ok(payload: dict[str, Any]) -> Any:
    assert payload["ok"], payload
    return payload["data"]


def _session(w: Workspace, errlog: Any) -> Client:
    params = StdioServerParameters(command=MCP, args=[], env={**w.base_env(), **w.env},
                                   cwd=str(w.repo))  # fmt: skip
    return Client(stdio_client(params, errlog=errlog))


def test_mcp_claim_to_submit_loop(server: LiveServer, admin: httpx.Client, tmp_path: Path) -> None:
    pid = admin_project(admin, review_mode="agent", admit_agent_tasks=True)
    w = workspace(tmp_path / "w", server.url, pid, issue_token(admin, "mcp-agent", pid))
    task = w.ok(
        "tasks",
        "create",
        "--input",
        w.file(
            "t.json",
            {"title": "write notes", "kind": "general", "acceptance_criteria": ["notes written"]},
        ),
    )
    task_id = task["task"]["id"]

    async def loop() -> None:
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with _session(w, errlog) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert set(tools) == TOOLS
                submit_schema = json.dumps(tools["coordinator_submit"].input_schema)
                assert '"additionalProperties": false' in submit_schema

                session = _ok(await _call(client, "coordinator_session_register",
                                          {"harness": "mcp-test"}))  # fmt: skip
                assert session["session_id"]
                nxt = _ok(await _call(client, "coordinator_next"))
                assert nxt["action"]["task_id"] == task_id

                key = "claim-key-0000000001"
                claimed = _ok(
                    await _call(
                        client,
                        "coordinator_claim",
                        {"task_id": task_id, "expected_task_revision": 1, "idempotency_key": key},
                    )
                )
                attempt = claimed["claim"]["attempt"]
                held = _ok(await _call(client, "coordinator_session_get"))["held_attempts"]
                assert [h["attempt_id"] for h in held] == [attempt["id"]]
                # The same key and arguments: the coordinator replays, no second claim.
                again = await _call(
                    client,
                    "coordinator_claim",
                    {"task_id": task_id, "expected_task_revision": 1, "idempotency_key": key},
                )
                assert (
                    again["replayed"] and again["data"]["claim"]["attempt"]["id"] == attempt["id"]
                )
                # The same key with other arguments: refused by the coordinator.
                other = await _call(client, "coordinator_claim", {"idempotency_key": key})
                assert other["error"]["code"] == "idempotency_conflict"
                assert other["error"]["exit_code"] == 5

                renewed = _ok(await _call(client, "coordinator_attempt_renew"))
                assert renewed["attempt"]["id"] == attempt["id"]
                cp = _ok(
                    await _call(
                        client,
                        "coordinator_checkpoint",
                        {"summary": "drafted", "handoff": "polish the notes"},
                    )
                )
                assert cp["checkpoint_id"]

                wrong = await _call(
                    client,
                    "coordinator_submit",
                    {
                        "body": {
                            "kind": "general",
                            "summary": "notes",
                            "acceptance_evidence": [{"criterion": "other", "evidence": "x"}],
                        }
                    },
                )
                assert wrong["error"]["code"] == "evidence_mismatch"
                assert wrong["error"]["exit_code"] == 6
                bad = await client.call_tool(
                    "coordinator_submit",
                    {
                        "body": {
                            "kind": "general",
                            "summary": "s",
                            "acceptance_evidence": [],
                            "bogus": 1,
                        }
                    },
                )
                assert bad.is_error  # the SDK validates the typed body
                sub = _ok(
                    await _call(
                        client,
                        "coordinator_submit",
                        {
                            "body": {
                                "kind": "general",
                                "summary": "notes written",
                                "acceptance_evidence": [
                                    {"criterion": "notes written", "evidence": "NOTES.md"}
                                ],
                            }
                        },
                    )
                )
                assert sub["task"]["work_status"] == "waiting_review"

                status = _ok(await _call(client, "coordinator_transport_status"))
                assert status["pending"] is None and status["attempt"] is None
                assert status["durable_mutation_journal"] is True
                assert _ok(await _call(client, "coordinator_transport_retry"))["retried"] is None
                shown = _ok(await _call(client, "coordinator_task_get", {"task_id": task_id}))
                assert shown["work_status"] == "waiting_review"

    anyio.run(loop)
    detail = admin_get(admin, f"/api/v1/projects/{pid}/tasks/{task_id}")
    assert len([a for a in detail["attempts"] if a["activity_id"] is None]) == 1
    # The adapter shares the CLI's state file: the CLI sees the adapter's session.
    assert w.ok("status")["session_id"] is not None


def test_mcp_review_through_the_adapter(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
) -> None:
    pid = admin_project(admin, review_mode="agent", admit_agent_tasks=True)
    worker = workspace(tmp_path / "a", server.url, pid, issue_token(admin, "mcp-worker", pid))
    worker.ok("connect")
    worker.ok(
        "tasks",
        "create",
        "--input",
        worker.file("t.json", {"title": "t", "kind": "general", "acceptance_criteria": ["ok"]}),
    )
    worker.ok("claim")
    worker.ok(
        "submissions",
        "general",
        "--input",
        worker.file(
            "s.json",
            {"summary": "s", "acceptance_evidence": [{"criterion": "ok", "evidence": "e"}]},
        ),
    )
    reviewer = workspace(tmp_path / "b", server.url, pid, issue_token(admin, "mcp-reviewer", pid))

    async def review() -> None:
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with _session(reviewer, errlog) as client:
                _ok(await _call(client, "coordinator_session_register"))
                rc = _ok(await _call(client, "coordinator_activity_claim"))
                assert rc["activity"]["kind"] == "agent_review"
                done = _ok(
                    await _call(
                        client,
                        "coordinator_review",
                        {"body": {"decision": "approved", "summary": "fine"}},
                    )
                )
                assert done["task"]["work_status"] == "done"

    anyio.run(review)


def test_mcp_adapter_refuses_bad_setup(tmp_path: Path) -> None:
    import subprocess

    w = workspace(tmp_path, "http://127.0.0.1:9", "p", "t" * 40)
    (w.state_dir / "credentials.toml").chmod(0o644)
    out = subprocess.run([MCP], capture_output=True, text=True, cwd=w.repo, env=w.base_env(),
                         timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 3 and "must be 0600" in out.stderr
    assert "Traceback" not in out.stderr


def test_mcp_lost_session_answer_is_recovered(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
) -> None:
    """The adapter journals the session id and proof first: after a lost answer,
    coordinator_transport_retry stores the session the coordinator opened."""
    proxy = DroppingProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        pid = admin_project(admin, admit_agent_tasks=True)
        w = workspace(tmp_path / "w", proxy.url, pid, issue_token(admin, "mcp-unlucky", pid))

        async def go() -> None:
            with (tmp_path / "mcp.log").open("w") as errlog:
                async with _session(w, errlog) as client:
                    proxy.drop = True
                    lost = await _call(client, "coordinator_session_register")
                    proxy.drop = False
                    assert lost["error"]["code"] == "transport_failed"
                    assert lost["error"]["exit_code"] == 7
                    status = _ok(await _call(client, "coordinator_transport_status"))
                    assert status["pending"]["op"] == "connect"
                    got = _ok(await _call(client, "coordinator_transport_retry"))
                    assert got["agent"] == "mcp-unlucky"
                    shown = _ok(await _call(client, "coordinator_session_get"))
                    assert shown["session_id"] == got["session_id"]
                    assert shown["held_attempts"] == []

        anyio.run(go)
    finally:
        proxy.close()
