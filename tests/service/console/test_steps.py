"""An attempt's steps (decision D45), on SQLite and PostgreSQL: only the attempt's own agent
records them (its role's credential, never the launch's), once, bounded, never with a secret
(the loop then sends the ending without the steps); the task page shows each attempt's run,
its ending, cost, tokens, duration and steps, agent text escaped."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.changes import HOSTILE
from tests.service.console.change_kit import launched
from tests.service.console.kit import browse_as
from tests.service.kit import ApiError, Service


def steps_body(**more: Any) -> dict[str, Any]:
    return {
        "harness": "claude",
        "model": "claude-sonnet-5",
        "steps": [
            {"kind": "model", "name": "message", "detail": "I will add the greeting."},
            {"kind": "tool", "name": "Bash", "detail": "git commit -m greeting", "ok": True},
            {"kind": "tool", "name": "Bash", "detail": HOSTILE, "ok": False, "exit_code": 2},
            {"kind": "file", "name": "Write", "detail": "greeting.txt", "ok": True},
        ],
        "steps_dropped": 3,
        "ending": "submitted",
        "why": "the agent submitted its work; the launch exited with code 0",
        "started_at_ms": 1_800_000_000_000,
        "duration_ms": 125_000,
        "usd": 0.1234,
        "usd_estimated": False,
        "input_tokens": 1200,
        "cached_input_tokens": 300,
        "output_tokens": 40,
        **more,
    }


def test_the_loop_records_the_steps_and_the_task_page_shows_them(svc: Service) -> None:
    pid, task, attempt, loop, _launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    recorded = loop.post(f"{at}/artifacts/steps", steps_body())
    assert recorded["kind"] == "steps" and recorded["ending"] == "submitted"
    read = loop.get(f"{at}/artifacts/steps")
    assert read["counts"] == {"steps": 7, "tool_calls": 3, "failed": 1}
    assert read["steps"][1] == steps_body()["steps"][1] | {"exit_code": None}
    with pytest.raises(ApiError) as again:  # once per attempt
        loop.post(f"{at}/artifacts/steps", steps_body(ending="killed"))
    assert again.value.code == "artifact_exists"

    browse_as(svc, svc.admin)
    html = svc.client.get(f"/console/projects/{pid}/tasks/{task['id']}").text
    run = html[html.index(f'id="run-{attempt["id"]}"') :]
    assert HOSTILE not in html and "&lt;script&gt;" in run  # agent text is escaped
    assert '<span class="ending ending-submitted">submitted</span>' in run
    assert "2 min 05 s" in run and "$0.1234" in run
    assert "1,200 in, 300 cached, 40 out" in run and "claude · claude-sonnet-5" in run
    assert "7 steps, 3 tool calls, 1 failed" in run and "and 3 more steps, not kept." in run
    assert '<pre class="detail">git commit -m greeting</pre>' in run
    assert '<span class="bad">failed</span> <span class="exit">exit 2</span>' in run


def test_only_the_attempts_own_agent_records_its_steps(svc: Service) -> None:
    pid, _task, attempt, loop, launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    # The launch (the agent whose run it is) holds only its attempt credential: no such route.
    resp = launch.raw("POST", f"{at}/artifacts/steps", steps_body())
    assert (resp.status_code, resp.json()["error"]["code"]) == (403, "operation_not_permitted")
    for caller in (svc.agent(pid), svc.admin):  # another agent of the project; a person
        resp = caller.raw("POST", f"{at}/artifacts/steps", steps_body())
        assert resp.status_code == 403, resp.text
    assert loop.raw("GET", f"{at}/artifacts/steps").status_code == 404


@pytest.mark.parametrize(
    "bad",
    [
        {"ending": "exploded"},
        {"steps": [{"kind": "tool", "name": "x"}] * 501},
        {"steps": [{"kind": "shell", "name": "x"}]},
        {"steps": [{"kind": "tool", "name": "x", "detail": "d" * 2001}]},
        {"usd": -1.0},
        {"duration_ms": -5},
        {"why": "\x00"},
        {"extra": 1},
    ],
)
def test_bad_steps_are_refused_and_nothing_kept(svc: Service, bad: dict[str, Any]) -> None:
    pid, _task, attempt, loop, _launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    resp = loop.raw("POST", f"{at}/artifacts/steps", steps_body(**bad))
    assert resp.status_code == 422, resp.text
    assert loop.raw("GET", f"{at}/artifacts/steps").status_code == 404


def test_a_secret_in_a_step_is_refused_and_the_ending_kept_without_steps(svc: Service) -> None:
    pid, task, attempt, loop, _launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    key = svc.agent(pid).issued["token"]  # a live credential of this coordinator
    body = steps_body()
    body["steps"][1]["detail"] = f"curl -H 'Authorization: Bearer {key}' http://x"
    resp = loop.raw("POST", f"{at}/artifacts/steps", body)
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "secret_detected"
    assert key not in resp.text
    assert loop.raw("GET", f"{at}/artifacts/steps").status_code == 404
    # What the loop sends then (agentc.supervisor.loop.steps.record): no steps, a note.
    note = "agentc-supervisor: the steps carried a credential; it stays in the logs"
    loop.post(f"{at}/artifacts/steps", {**body, "steps": None, "model": None, "note": note})
    browse_as(svc, svc.admin)
    html = svc.client.get(f"/console/projects/{pid}/tasks/{task['id']}").text
    assert key not in html and f"The steps are not shown: {note}" in html
    assert "$0.1234" in html
