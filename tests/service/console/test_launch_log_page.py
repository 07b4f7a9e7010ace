"""A launch's event log summary (issue 30, decision D47), on SQLite and PostgreSQL: the loop
records it with its role's credential (never the launch's), tied to the submission; the
reviewer's claim carries it, and the change page shows it, agent text escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentc.files.launchlog import LaunchLogs, ensure_directory, read_log, summarize
from agentc.supervisor.contracts import reviewer_prompt
from tests.kit.changes import HOSTILE
from tests.service.console.change_kit import launched, submitted
from tests.service.console.kit import browse_as
from tests.service.kit import ApiError, Service


def _summary(tmp_path: Path) -> dict[str, Any]:
    """A real log's summary: calls, a host reached, one refused (its name the agent's text)."""
    ensure_directory(tmp_path)
    gateway = LaunchLogs(tmp_path, "gateway")
    gateway.append("l1", {"event": "model_call", "model": "claude-sonnet-5", "outcome": "ok",
                          "usd": 0.02, "input_tokens": 900, "output_tokens": 30})  # fmt: skip
    egress = LaunchLogs(tmp_path, "egress")
    egress.append("l1", {"event": "connection", "host": "github.com", "port": 443,
                         "allowed": True})  # fmt: skip
    egress.append("l1", {"event": "connection_closed", "host": "github.com", "port": 443,
                         "bytes_up": 512, "bytes_down": 40_000})  # fmt: skip
    egress.append("l1", {"event": "connection", "host": HOSTILE[:200], "port": 443,
                         "allowed": False, "reason": "host is not on the allowlist"})  # fmt: skip
    LaunchLogs(tmp_path, "supervisor").append("l1", {"event": "launch_ended", "exit_code": 0})
    return summarize(read_log(tmp_path, "l1"))


def test_the_summary_reaches_the_reviewer_and_the_change_page(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path, review_mode="agent")
    summary = _summary(tmp_path / "logs-dir")
    body = {**summary, "submission_id": run.submission["id"]}
    recorded = run.loop.post(f"{run.at}/artifacts/launch-log", body)
    assert recorded["kind"] == "launch_log"
    read = run.loop.get(f"{run.at}/artifacts/launch-log")
    assert read["submission_id"] == run.submission["id"] and read["usd"] == 0.02
    assert read["hosts"] == [{"host": "github.com", "port": 443, "connections": 1,
                              "bytes_up": 512, "bytes_down": 40_000}]  # fmt: skip
    with pytest.raises(ApiError) as again:
        run.loop.post(f"{run.at}/artifacts/launch-log", body)
    assert again.value.code == "artifact_exists"

    # An agent reviewer's claim carries it, and the reviewer's prompt quotes it as data.
    reviewer = svc.agent(run.pid, name="reviewer-1", credential_class="supervised")
    offer = reviewer.get(f"/api/v1/projects/{run.pid}/next?role=reviewer")["action"]
    claim = reviewer.post(
        f"/api/v1/projects/{run.pid}/workflow-activities/{offer['activity_id']}/claim",
        {"expected_submission_id": run.submission["id"]},
    )
    assert claim["launch_log"]["unusual"] == ["1 network connection(s) refused by the egress proxy"]
    prompt = reviewer_prompt(
        project=run.pid, title="t", base=None, candidate=None, criteria=["it works"],
        submission=claim["submission"], instructions={}, launch_log=claim["launch_log"],
    )  # fmt: skip
    assert '"implementer_launch": {' in prompt and '"bytes_down": 40000' in prompt
    assert "<script" not in prompt.split("<review-data>")[1]  # "<" is escaped in the data

    browse_as(svc, svc.admin)
    html = svc.client.get(run.page).text
    section = html[html.index('id="launch-log"') :]
    assert "1 model call (<code>claude-sonnet-5</code>), $0.0200" in section
    assert "1 host reached, 1 connection refused, 0 pushes" in section
    assert "<code>github.com:443</code>" in section and "40,000" in section
    assert HOSTILE not in html and "&lt;" in section  # the agent's host name, escaped


def test_only_the_attempts_own_agent_records_it(svc: Service, tmp_path: Path) -> None:
    body = _summary(tmp_path / "logs-dir")
    pid, _task, attempt, loop, launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    # The launch whose log it is holds only its attempt credential: no such route.
    resp = launch.raw("POST", f"{at}/artifacts/launch-log", body)
    assert (resp.status_code, resp.json()["error"]["code"]) == (403, "operation_not_permitted")
    for caller in (svc.agent(pid), svc.admin):  # another agent of the project; a person
        resp = caller.raw("POST", f"{at}/artifacts/launch-log", body)
        assert resp.status_code == 403, resp.text
    other = submitted(svc, tmp_path / "other")  # a submission of another attempt
    resp = loop.raw("POST", f"{at}/artifacts/launch-log",
                    {**body, "submission_id": other.submission["id"]})  # fmt: skip
    assert resp.status_code == 404
    for bad in ({"usd": -1}, {"hosts": [{"port": 70000}]}, {"unusual": ["x"] * 41}, {"x": 1}):
        resp = loop.raw("POST", f"{at}/artifacts/launch-log", {**body, **bad})
        assert resp.status_code == 422, (bad, resp.text)
    assert loop.raw("GET", f"{at}/artifacts/launch-log").status_code == 404
    browse_as(svc, svc.admin)
    assert 'id="no-launch-log"' in svc.client.get(other.page).text
