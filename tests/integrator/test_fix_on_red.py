"""Fix-on-red with the real integrator and coordinator: a flaky check is run once more and
recorded as flaky (and counted on the attention digest); a red candidate goes back for at most
the project's fix rounds, then to a person, with every round on record; a red target is
reported once and blames no candidate."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.client.kit import admin_get
from tests.integrator.kit import Setup, make_setup
from tests.kit.live import LiveServer

# Fails in the first checkout of a revision, passes in the fresh one it is run again in.
FLAKY = ["/bin/sh", "-c", 'case "$PWD" in */rerun-*) echo second;; *) echo first; exit 1;; esac']
# Red for any change that adds bad.txt; the target stays green.
NO_BAD = ["/bin/sh", "-c", "test ! -e bad.txt || { echo bad.txt is there; exit 3; }"]


def _run(s: Setup) -> None:
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr


def _digest(s: Setup) -> Any:
    return admin_get(s.admin, f"/api/v1/projects/{s.project_id}/attention")


def test_a_flaky_check_is_rerun_once_and_recorded(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config({"unit": ["/bin/sh", "-c", "test -f README"], "flaky": FLAKY})
    sub = s.approved({"one.txt": "1\n"})
    _run(s)
    landing = s.landing(sub["task"]["id"])
    assert landing["landed_revision"] == s.tip()
    unit, flaky = landing["checks"]
    assert (unit["outcome"], unit["flaky"]) == ("passed", False)
    assert (flaky["outcome"], flaky["flaky"]) == ("passed", True)
    assert "second" in flaky["tail"]
    trailers = s.trailers(s.tip())  # (the last Agentc-Check line: the flaky one)
    assert trailers["Agentc-Check"].startswith("flaky passed exit=0 ms=")
    assert trailers["Agentc-Check"].endswith(" flaky=first failed (exit 1)")
    assert _digest(s)["flaky_checks"] == [
        {"name": "flaky", "count": 1, "last_at": _digest(s)["flaky_checks"][0]["last_at"]}
    ]


def test_a_red_candidate_gets_the_fix_rounds_then_a_person(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin, fix_rounds=1)
    s.write_config({"unit": NO_BAD})
    first = s.approved({"bad.txt": "x\n"})
    task_id = first["task"]["id"]
    _run(s)
    task = s.task(task_id)
    assert (task["work_status"], task["red_rounds"]) == ("ready", 1)  # the one fix round
    back = s.landing(task_id)
    assert back["sent_back"]["reason"] == "check unit failed (exit 3)"
    [check] = back["checks"]
    assert check["command"] == " ".join(NO_BAD) and "bad.txt is there" in check["tail"]
    assert check["exit_code"] == 3 and check["flaky"] is False  # failed twice: not flaky

    second = _resubmit(s, task_id)  # the fix round's candidate is red too
    _run(s)
    task = s.task(task_id)
    assert (task["work_status"], task["red_rounds"]) == ("blocked", 2)
    assert task["blocked_reason"].startswith("fix-on-red: a required check failed on 2 ")
    blocked = [b for b in _digest(s)["blocked_tasks"] if b["task_id"] == task_id]
    assert blocked and "fix-on-red" in blocked[0]["reason"]
    # Every round's outcome is on the task's integration activities.
    rounds = [
        a for a in s.workflow(task_id)["activities"] if a["kind"] == "integration"
    ]  # fmt: skip
    assert {a["submission_id"] for a in rounds} == {
        first["submission"]["id"],
        second["submission"]["id"],
    }
    assert all(a["sent_back"]["reason_code"] == "check_failed" for a in rounds)
    # A person puts it back: the rounds start again.
    put_back = s.admin.post(
        f"/api/v1/projects/{s.project_id}/tasks/{task_id}/unblock",
        json={"expected_revision": task["revision"], "reason": "try again"},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert put_back.status_code == 200, put_back.text
    assert s.task(task_id)["red_rounds"] == 0


def _resubmit(s: Setup, task_id: str) -> dict[str, Any]:
    """Another worker claims the task put back and submits a red candidate again."""
    return s.submit({"bad.txt": "still\n"}, task_id=task_id, approve=True)


def test_a_red_target_is_reported_once_and_waits(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config({"unit": NO_BAD})
    waiting = [s.approved({f"f{i}.txt": "x\n"}) for i in range(2)]
    red = s.push_to_target({"bad.txt": "x\n"}, "break the target")
    _run(s)
    _run(s)  # nothing new: the candidates wait, nothing is reported again
    assert [r["event"] for r in s.reports()] == ["target_red"]
    [shown] = _digest(s)["target_red"]
    assert (shown["target_revision"], shown["failed_checks"]) == (red, ["unit"])
    for sub in waiting:  # not blamed, not counted
        task = s.task(sub["task"]["id"])
        assert (task["work_status"], task["red_rounds"]) == ("waiting_integration", 0)
    s.remove_from_target("bad.txt")
    _run(s)
    assert all(s.task(sub["task"]["id"])["work_status"] == "done" for sub in waiting)
    assert _digest(s)["target_red"] == []  # green again: a landing came after
