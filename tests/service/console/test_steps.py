"""An attempt's steps (decision D45), on SQLite and PostgreSQL: only the attempt's own agent
records them (its role's credential, never the launch's), once, bounded, never with a secret
(the loop then sends the ending without the steps); the task page shows each attempt's run,
its ending, cost, tokens, duration and steps, agent text escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentc.supervisor.loop.steps import UNWATCHED, Ending, Tail, ending_of
from tests.kit.changes import HOSTILE
from tests.service.console.change_kit import launched, steps_body
from tests.service.console.kit import browse_as
from tests.service.kit import ApiError, Service


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


def test_the_current_step_rides_on_the_renewal(svc: Service) -> None:
    pid, task, attempt, loop, launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    gen = attempt["generation"]
    key = svc.agent(pid).issued["token"]
    resp = loop.raw("POST", f"{at}/renew", {"generation": gen, "step": f"Bash: echo {key}"})
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "secret_detected"
    # The launch cannot renew (nor tell a step): the loop holds the lease.
    resp = launch.raw("POST", f"{at}/renew", {"generation": gen, "step": "Bash: lies"})
    assert resp.status_code == 403, resp.text
    for step in ("Bash: git status", f"Edit: {HOSTILE}"):
        loop.post(f"{at}/renew", {"generation": gen, "step": step})
    loop.post(f"{at}/renew", {"generation": gen})  # no step: the last one told stays
    browse_as(svc, svc.admin)
    html = svc.client.get(f"/console/projects/{pid}/tasks/{task['id']}").text
    assert key not in html and HOSTILE not in html
    assert '<span class="step-now">Edit: &lt;script&gt;' in html and "Working now, for" in html
    board = svc.client.get(f"/console/projects/{pid}").text
    assert board.count("an agent is working on it") == 1
    loop.post(f"{at}/release", {"generation": gen, "handoff": "stopping"})
    assert "Working now" not in svc.client.get(f"/console/projects/{pid}/tasks/{task['id']}").text
    assert "an agent is working on it" not in svc.client.get(f"/console/projects/{pid}").text


def test_the_loop_reads_the_current_step_as_the_stream_grows(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    tail = Tail(run, "claude")
    assert tail.current() is None  # no stream yet
    tool = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make test"}}
    line = {"type": "assistant", "message": {"id": "m1", "content": [tool]}}
    (run / "events.jsonl").write_text(json.dumps(line) + "\n" + '{"type": "assis')
    assert tail.current() == "Bash: make test"
    assert Tail(run, "command:/bin/agent").current() is None  # its output is its own


def _ending(state: str, exited: str = UNWATCHED, stopped: str | None = None) -> Ending:
    return ending_of(state, stopped=stopped, at_limit=stopped is not None, rate_limited=False,
                     exited=exited)  # fmt: skip


def test_a_run_s_ending_says_what_the_loop_saw() -> None:
    """The words of an ending, as both the loop that ran a launch and the next loop settling a
    dead one's record them (agentc.supervisor.loop.launching.record_run)."""
    assert _ending("submitted") == Ending("submitted", f"the agent submitted its work; {UNWATCHED}")
    assert _ending("active") == Ending(
        "released", f"{UNWATCHED}; the supervisor released the attempt"
    )
    # a lease that lapsed meanwhile is not said to be released by the supervisor
    assert _ending("expired") == Ending("released", f"{UNWATCHED}; the attempt was already expired")
    assert _ending("released", "exit 0").why == "the agent released the attempt"
    assert _ending("active", "exit 0", stopped="over its budget").kind == "limit_hit"
