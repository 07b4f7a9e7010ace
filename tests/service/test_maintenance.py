"""`agent-coordinator-server maintenance` on both backends: old receipts' answers and old canary
payloads are compacted in batches by the real host command (on the service's clock), their rows
stay and keep doing their job (a late retry is still refused, a resent canary row is still a
duplicate), recent payloads and permanent history are untouched, and the command says what it
removed."""

from __future__ import annotations

import json
from typing import Any

from agentc.core.model import RECEIPT_RETENTION_MS
from agentc.service.maintenance import BATCH_ROWS
from agentc.service.work.spend import canary_report
from tests.service.kit import ADMIN_PASSWORD, ApiError, Caller, Clock, Service

DAY_S = 24 * 3600


def _rows(svc: Service, sql: str) -> list[tuple[Any, ...]]:
    return svc.executor.read(lambda tx: [tuple(r) for r in tx.conn.exec_driver_sql(sql)])


def _answers(svc: Service) -> dict[str, int]:
    """Each receipt (by key) and the byte length of its stored answer (-1: compacted)."""
    rows = _rows(svc, "SELECT key, body FROM receipts")
    return {k: -1 if b is None else len(b.encode()) for k, b in rows}


def _history(svc: Service) -> list[tuple[Any, ...]]:
    return _rows(svc, "SELECT id, revision, title FROM tasks ORDER BY id") + _rows(
        svc, "SELECT seq, kind, data_json FROM events WHERE kind <> 'maintenance_compacted' "
        "ORDER BY seq"
    )  # fmt: skip


def test_maintenance_compacts_old_payloads_and_keeps_their_rows(svc: Service, clock: Clock) -> None:
    pid = svc.project()
    data = svc.admin.post("/api/v1/admin/agents", {"name": "canary-bot", "projects": [pid]})
    canary = Caller(svc.client, {"Authorization": f"Bearer {data['token']}"})
    canaries = f"/api/v1/projects/{pid}/telemetry/canary-results"
    old_row = {"harness": "claude", "outcome": "pass", "duration_ms": 1200}
    assert canary.post(canaries, {"host": "h", "rows": [old_row]})["accepted"] == 1
    old_key = "old-task-key"
    first = svc.admin.post(
        f"/api/v1/projects/{pid}/tasks",
        {"title": "kept forever", "acceptance_criteria": ["x"]},
        key=old_key,
    )
    for n in range(BATCH_ROWS + 30):  # more than one batch
        svc.task(pid, title=f"old {n}")
    old = _answers(svc)
    clock.advance(RECEIPT_RETENTION_MS / 1000 + 2 * DAY_S)
    svc.admin = svc.login("admin", ADMIN_PASSWORD)  # the browser session has expired
    new_row = {"harness": "claude", "outcome": "fail", "duration_ms": 900}
    assert canary.post(canaries, {"host": "h", "rows": [new_row]})["accepted"] == 1
    svc.task(pid, title="recent")
    recent = {k: n for k, n in _answers(svc).items() if k not in old}
    history = _history(svc)

    out = svc.host("maintenance", "--json")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)

    answers = _answers(svc)
    assert set(answers) == set(old) | set(recent)  # every row stays
    assert all(answers[k] == -1 for k in old)
    assert {k: answers[k] for k in recent} == recent
    receipts = done["receipt_answers"]
    assert receipts["rows"] == len(old) and receipts["bytes"] == sum(old.values())
    assert receipts["batches"] >= 2 and receipts["longest_hold_ms"] > 0
    canary_rows = dict(_rows(svc, "SELECT row_json, received_at FROM telemetry_rows"))
    assert "{}" in canary_rows and len(canary_rows) == 2
    assert done["canary_payloads"]["rows"] == 1 and done["canary_payloads"]["bytes"] > 0
    assert _history(svc) == history  # permanent history untouched

    # The rows keep their jobs: the old key is still refused, never acted on again; the old
    # canary row is still a duplicate; the reports still read the recent one.
    try:
        svc.admin.post(
            f"/api/v1/projects/{pid}/tasks",
            {"title": "kept forever", "acceptance_criteria": ["x"]},
            key=old_key,
        )
        raise AssertionError("an old key was acted on again")
    except ApiError as refused:
        assert refused.code == "idempotency_receipt_expired"
    assert _rows(svc, f"SELECT count(*) FROM tasks WHERE id = '{first['task']['id']}'")[0][0] == 1
    again = canary.post(canaries, {"host": "h", "rows": [old_row]})
    assert again["accepted"] == 0 and again["duplicates"] == 1
    report = svc.executor.read(lambda tx: canary_report(tx.conn, pid, tx.now))
    assert [c["outcome"] for c in report["latest"]] == ["fail"]

    # A second run finds nothing, and each run is on the audit trail.
    again_done = json.loads(svc.host("maintenance", "--json").stdout)
    assert again_done["receipt_answers"]["rows"] == 0
    assert again_done["canary_payloads"]["rows"] == 0
    events = _rows(svc, "SELECT data_json FROM events WHERE kind = 'maintenance_compacted'")
    assert len(events) == 2 and json.loads(events[0][0])["receipt_answers"]["rows"] == len(old)
