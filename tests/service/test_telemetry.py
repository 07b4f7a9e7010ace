"""Cost rows and canary results from supervised hosts."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from agentc.core.model import CALLS_MAX, JSON_DEPTH_MAX, TOKENS_MAX, USD_MAX
from agentc.store.sql import fetch_all
from agentc.store.tx import Tx
from tests.service.kit import Caller, Service, claim, submit_general


def test_cost_rows_are_stored_once_and_fenced(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    worker = svc.agent(pid, name="worker")
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    # The worker's host reports with the worker's supervised credential.
    host = svc.agent(pid, name="worker", credential_class="supervised", session=False)
    row = {
        "session_id": "s1",
        "attempt_id": attempt["id"],
        "generation": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "usd": 0.01,
        "model": "m",
    }
    path = f"/api/v1/projects/{pid}/telemetry/cost-rows"
    out = host.post(path, {"host": "h1", "rows": [row, row]})
    assert (out["accepted"], out["duplicates"], out["rejected"]) == (1, 1, [])
    out = host.post(path, {"host": "h1", "rows": [row]})
    assert (out["accepted"], out["duplicates"]) == (0, 1)
    assert host.post(path, {"host": "h2", "rows": [row]})["accepted"] == 1
    bad = [{**row, "generation": 7}, {**row, "input_tokens": -1}, {"usd": 1}]
    out = host.post(path, {"host": "h1", "rows": bad})
    assert out["accepted"] == 0
    assert [r["index"] for r in out["rejected"]] == [0, 1, 2]
    assert "generation" in out["rejected"][0]["problem"]


def test_only_the_attempts_own_agent_reports_its_cost(svc: Service) -> None:
    pid = svc.project(review_mode="none")
    task = svc.task(pid, kind="general")
    worker = svc.agent(pid, name="worker")
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    path = f"/api/v1/projects/{pid}/telemetry/cost-rows"
    row = {"session_id": "s1", "attempt_id": attempt["id"], "generation": 1, "usd": 9999}

    def report(caller: Caller, **changes: Any) -> dict[str, Any]:
        out: dict[str, Any] = caller.post(path, {"host": "h", "rows": [{**row, **changes}]})
        return out

    # Another agent, and another agent's supervised host, may not bill the worker's attempt.
    for other in (svc.agent(pid), svc.agent(pid, credential_class="supervised", session=False)):
        out = report(other)
        assert out["accepted"] == 0, out
        assert out["rejected"][0]["problem"].startswith("attempt_id: only the attempt's own")
    # The attempt's own session reports while the attempt is active...
    assert report(worker, usd=1.5)["accepted"] == 1
    # ...but not from another session of the same credential.
    assert report(worker_again(svc, worker), usd=1.6)["accepted"] == 0
    submit_general(worker, pid, attempt)
    # Once submitted, the session's rows are refused, as docs/api.md says...
    assert report(worker, usd=2.0)["rejected"]
    # ...while the worker's supervised credential (the supervisor loop, after the launch
    # ended) still reports what the submitted attempt cost.
    loop = svc.agent(pid, name="worker", credential_class="supervised")
    assert report(loop, usd=2.5)["accepted"] == 1
    stored = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql("SELECT row_json FROM telemetry_rows").all()
    )
    assert sorted(json.loads(r[0])["usd"] for r in stored) == [1.5, 2.5]


def worker_again(svc: Service, worker: Caller) -> Caller:
    """A second session of the worker's credential."""
    again = Caller(svc.client, {"Authorization": worker.headers["Authorization"]})
    s = again.post("/api/v1/sessions", {"harness": "test"})
    again.headers["X-Coordinator-Session"] = s["session_id"]
    again.headers["X-Coordinator-Session-Proof"] = s["proof"]
    return again


def test_unknown_project_is_project_not_found(svc: Service) -> None:
    host = svc.agent(credential_class="supervised", session=False)
    resp = host.raw(
        "POST",
        "/api/v1/projects/nope/telemetry/cost-rows",
        {"host": "h", "rows": [{"session_id": "s"}]},
    )
    assert resp.status_code == 404
    err = resp.json()["error"]
    assert err["code"] == "project_not_found" and err["details"]["project_id"] == "nope"


def test_canary_results_only_from_canary_agents(svc: Service) -> None:
    pid = svc.project()
    path = f"/api/v1/projects/{pid}/telemetry/canary-results"
    row = {"harness": "claude", "outcome": "pass", "duration_ms": 1200}
    assert (
        svc.agent(pid, session=False).raw("POST", path, {"host": "h", "rows": [row]}).status_code
        == 403
    )
    data = svc.admin.post("/api/v1/admin/agents", {"name": "canary-bot", "projects": [pid]})
    canary = Caller(svc.client, {"Authorization": f"Bearer {data['token']}"})
    assert canary.post(path, {"host": "h", "rows": [row]})["accepted"] == 1


def _post_json_text(caller: Caller, path: str, text: str) -> tuple[int, dict[str, Any]]:
    """POST text as it is (json.dumps would never write NaN or nest 900 deep by hand)."""
    headers = {**caller.headers, "Idempotency-Key": str(uuid.uuid4())}
    headers["Content-Type"] = "application/json"
    caller.client.cookies.clear()
    resp = caller.client.post(path, content=text.encode(), headers=headers)
    return resp.status_code, resp.json()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_refused_and_never_stored(svc: Service, number: str) -> None:
    pid = svc.project()
    host = svc.agent(pid, credential_class="supervised", session=False)
    path = f"/api/v1/projects/{pid}/telemetry/cost-rows"
    status, body = _post_json_text(host, path, _one_row_with("usd", number))
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    assert number.lstrip("-") in body["error"]["message"]
    assert _stored_rows(svc, pid) == []


@pytest.mark.parametrize(
    "row, field",
    [
        ({"input_tokens": 10**40}, "input_tokens"),
        ({"output_tokens": TOKENS_MAX + 1}, "output_tokens"),
        ({"cache_read_tokens": 1.5}, "cache_read_tokens"),
        ({"calls": CALLS_MAX + 1}, "calls"),
        ({"usd": USD_MAX + 0.5}, "usd"),
        ({"usd": -0.01}, "usd"),
        ({"occurred_at_ms": 2**60}, "occurred_at_ms"),
        ({"extra": {"deep": [1, -(2**54)]}}, "extra.deep.1"),
        ({"attempt_id": {"id": "x"}}, "attempt_id"),
        ({"attempt_id": ["x"]}, "attempt_id"),
        ({"attempt_id": "a\x00b"}, "attempt_id"),
        ({"attempt_id": ""}, "attempt_id"),
    ],
)
def test_cost_row_fields_out_of_range_or_of_the_wrong_type_are_rejected(
    svc: Service, row: dict[str, Any], field: str
) -> None:
    pid = svc.project()
    host = svc.agent(pid, credential_class="supervised", session=False)
    path = f"/api/v1/projects/{pid}/telemetry/cost-rows"
    good = {"session_id": "s", "input_tokens": TOKENS_MAX, "usd": USD_MAX, "calls": 3}
    out = host.post(path, {"host": "h", "rows": [{**good, **row}, good]})
    assert out["accepted"] == 1
    assert [r["index"] for r in out["rejected"]] == [0]
    assert out["rejected"][0]["problem"].startswith(field + ":")
    assert [json.loads(t) for t in _stored_rows(svc, pid)] == [good]


def test_canary_numbers_have_a_range(svc: Service) -> None:
    pid = svc.project()
    data = svc.admin.post("/api/v1/admin/agents", {"name": "canary-bot", "projects": [pid]})
    canary = Caller(svc.client, {"Authorization": f"Bearer {data['token']}"})
    path = f"/api/v1/projects/{pid}/telemetry/canary-results"
    row = {"harness": "claude", "outcome": "pass", "duration_ms": 2**53 + 1}
    out = canary.post(path, {"host": "h", "rows": [row]})
    assert out["accepted"] == 0 and out["rejected"][0]["problem"].startswith("duration_ms:")


def test_a_telemetry_body_nested_900_deep_is_400(svc: Service) -> None:
    pid = svc.project()
    host = svc.agent(pid, credential_class="supervised", session=False)
    path = f"/api/v1/projects/{pid}/telemetry/cost-rows"
    deep = "[" * 900 + "]" * 900
    status, body = _post_json_text(host, path, _one_row_with("x", deep))
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    assert (
        body["error"]["message"] == f"body: nested deeper than {JSON_DEPTH_MAX} arrays and objects"
    )
    ok = "[" * (JSON_DEPTH_MAX - 4) + "]" * (JSON_DEPTH_MAX - 4)
    status, body = _post_json_text(host, path, _one_row_with("x", ok))
    assert status == 200 and body["data"]["accepted"] == 1


def _one_row_with(field: str, json_text: str) -> str:
    return '{"host": "h", "rows": [{"session_id": "s", "' + field + '": ' + json_text + "}]}"


def _stored_rows(svc: Service, project_id: str) -> list[str]:
    def rows(tx: Tx) -> list[str]:
        sql = "SELECT row_json FROM telemetry_rows WHERE project_id = :p"
        return fetch_all(tx.conn, sql, str, p=project_id)

    return svc.executor.read(rows)
