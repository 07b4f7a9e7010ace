"""Cost rows and canary results from supervised hosts."""

from __future__ import annotations

from tests.service.kit import Caller, Service, claim


def test_cost_rows_are_stored_once_and_fenced(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    worker = svc.agent()
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    host = svc.agent(credential_class="supervised", session=False)
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
        svc.agent(session=False).raw("POST", path, {"host": "h", "rows": [row]}).status_code == 403
    )
    data = svc.admin.post("/api/v1/admin/agents", {"name": "canary-bot"})
    canary = Caller(svc.client, {"Authorization": f"Bearer {data['token']}"})
    assert canary.post(path, {"host": "h", "rows": [row]})["accepted"] == 1
