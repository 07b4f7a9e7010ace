"""Several launches at once (issue 33) in personal mode, with real parts: each launch in a
worker of its own, within ``[run] launches``; each claimed once, renewed, settled once; each
with its own cgroup; a drain, the kill switch and a killed worker with others running."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from agentc.sandbox import reaper
from agentc.sandbox.limits import LaunchLimits, Limits
from tests.client.kit import admin_get
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import HANGING_AGENT, SUBMITTING_AGENT, LoopKit, make_loop_kit

# The submitting agent, held at its start until the test lets it go ($TMPDIR/go).
GATED_AGENT = SUBMITTING_AGENT.replace(
    """echo '{"type": "agent", "step": "start"}'\n""",
    """echo '{"type": "agent", "step": "start"}'\n"""
    """while [ ! -e "$TMPDIR/go" ]; do sleep 0.1; done\n""",
    1,
)


def running(loop: LoopKit, count: int) -> list[dict[str, Any]]:
    """The launch records whose harness runs (a pid, and its first event written), once there
    are ``count`` of them."""
    found = []
    for record in loop.records():
        events = loop.state / "impl/runs" / record["launch_id"] / "events.jsonl"
        if record.get("pid") and events.exists() and events.stat().st_size:
            found.append(record)
    return found if len(found) == count else []


def let_go(loop: LoopKit, record: dict[str, Any]) -> None:
    (loop.state / "impl/runs" / record["launch_id"] / "tmp/go").touch()


def heartbeat(loop: LoopKit) -> dict[str, Any]:
    beat: dict[str, Any] = json.loads((loop.state / "loop/heartbeat.json").read_text())
    return beat


def claims(loop: LoopKit, admin: httpx.Client) -> list[str]:
    """The attempts claimed in the project, one entry per claim event."""
    seen = admin_get(admin, f"/api/v1/projects/{loop.project}/events?limit=200")["items"]
    return [e["record_id"] for e in seen if e["kind"] == "attempt.claimed"]


def renewed(loop: LoopKit, admin: httpx.Client) -> set[str]:
    """The attempts renewed at least once."""
    seen = admin_get(admin, f"/api/v1/projects/{loop.project}/events?limit=200")["items"]
    return {e["record_id"] for e in seen if e["kind"] == "attempt.renewed"}


def cgroup_pids(launch_id: str) -> set[int]:
    """The processes in a launch's cgroups (none where the host gives no cgroup)."""
    limits = LaunchLimits(Limits(), f"agentc-{launch_id}")
    limits.adopt()
    return {int(p) for g in limits.groups for p in (g / "cgroup.procs").read_text().split()}


def stop(loop: LoopKit, proc: Any) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    return loop.log.read_text()


def test_launches_run_side_by_side_within_the_slots_each_claimed_and_settled_once(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, GATED_AGENT)
    loop.write_config(launches=2, poll_seconds=1)
    tasks = {loop.task(f"task {n}")["id"] for n in range(3)}
    proc = loop.run_forever()
    try:
        first = loop.wait_for(lambda: running(loop, 2), why=loop.log.read_text)
        # Two at once, no third: the slots are full (the heartbeat lists both).
        beat = loop.wait_for(
            lambda: len(heartbeat(loop).get("launches", [])) == 2 and heartbeat(loop)
        )
        assert {x["launch"] for x in beat["launches"]} == {r["launch_id"] for r in first}
        assert beat["slots"] == {"launches": 2, "reviews": 0}
        time.sleep(2)  # two more polls: still two
        assert len(loop.records()) == 2
        # Each launch in a worker of its own, each harness in its own cgroup.
        assert len({r["loop_pid"] for r in first}) == 2 and proc.pid not in {
            r["loop_pid"] for r in first
        }
        one, two = (cgroup_pids(r["launch_id"]) for r in first)
        if one or two:
            assert first[0]["pid"] in one and first[1]["pid"] in two and not one & two
        let_go(loop, first[0])
        # Its end frees a slot: the third task is claimed while the second launch still runs.
        ids = {r["launch_id"] for r in first}
        third = loop.wait_for(
            lambda: [r for r in running(loop, 2) if r["launch_id"] not in ids],
            why=loop.log.read_text,
        )[0]
        assert third["task"] not in {r["task"] for r in first}
        for record in (first[1], third):
            let_go(loop, record)
        loop.wait_for(lambda: len(loop.records("finished")) == 3 and not loop.records())
    finally:
        err = stop(loop, proc)
    assert proc.returncode == 0, err
    assert "up to 2 launches at once ([run] launches)" in err
    finished = loop.records("finished")
    assert {f["task"] for f in finished} == tasks  # each task once
    assert all(f["outcome"] == "left as it is (submitted)" for f in finished)
    assert len(claims(loop, admin)) == 3  # no task claimed twice
    for task in tasks:
        assert loop.show(task)["work_status"] == "waiting_review"
    assert err.count("ended: Launched {task: ") == 3, err
    assert loop.leftovers() == []


def test_a_drain_stops_every_running_launch_renewed_meanwhile_and_releases_each_once(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    # A short lease: each launch's worker renews its own attempt while the other runs.
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT, policy={"lease_seconds": 30})
    loop.write_config(launches=2, poll_seconds=1, drain_seconds=1)
    tasks = {loop.task(f"task {n}")["id"] for n in range(2)}
    proc = loop.run_forever()
    try:
        records = loop.wait_for(lambda: running(loop, 2), why=loop.log.read_text)
        attempts = {r["attempt"] for r in records}
        loop.wait_for(lambda: renewed(loop, admin) >= attempts, why=loop.log.read_text)
    finally:
        err = stop(loop, proc)
    assert proc.returncode == 0, err
    finished = {f["launch_id"]: f for f in loop.records("finished")}
    assert set(finished) == {r["launch_id"] for r in records}
    for record in records:
        assert finished[record["launch_id"]]["outcome"] == "released"
        handoff = loop.attempt(record["attempt"])["attempt"]["handoff"]
        assert "the host supervisor stopped" in handoff
        assert not os.path.exists(f"/proc/{record['pid']}")
    assert {loop.show(t)["work_status"] for t in tasks} == {"ready"}
    assert loop.records() == [] and loop.leftovers() == []
    assert err.count("stopped renewing attempt") == 2, err


def test_the_kill_switch_stops_new_claims_while_running_launches_finish(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, GATED_AGENT)
    loop.write_config(launches=2, poll_seconds=1)
    tasks = [loop.task(f"task {n}")["id"] for n in range(3)]
    proc = loop.run_forever()
    try:
        records = loop.wait_for(lambda: running(loop, 2), why=loop.log.read_text)
        (loop.state / "kill-switch").touch()
        for record in records:
            let_go(loop, record)
        loop.wait_for(lambda: len(loop.records("finished")) == 2 and not loop.records())
        loop.wait_for(lambda: "kill_switch" in heartbeat(loop)["holds"])
        time.sleep(2)  # more polls: still nothing claimed
        assert loop.records() == []
    finally:
        err = stop(loop, proc)
    assert proc.returncode == 0, err
    waiting = [t for t in tasks if loop.show(t)["work_status"] == "waiting_review"]
    assert len(waiting) == 2
    [left] = [t for t in tasks if t not in waiting]
    assert loop.show(left)["work_status"] == "ready"


def test_a_killed_worker_is_settled_while_the_other_launch_runs_on(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """SIGKILL to one launch's worker: its sandbox dies with it, the loop settles its record
    once (the attempt released), reaps what it left, and the other launch is untouched."""
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT)
    loop.write_config(launches=2, poll_seconds=1, drain_seconds=1)
    for n in range(2):
        loop.task(f"task {n}")
    proc = loop.run_forever()
    try:
        killed, other = loop.wait_for(lambda: running(loop, 2), why=loop.log.read_text)
        (loop.state / "kill-switch").touch()  # the freed slot is not filled again
        os.kill(killed["loop_pid"], signal.SIGKILL)
        loop.wait_for(
            lambda: (
                killed["launch_id"] in {f["launch_id"] for f in loop.records("finished")}
                and len(loop.records()) == 1
            ),
            why=loop.log.read_text,
        )
        assert os.path.exists(f"/proc/{other['pid']}")  # the other launch runs on
        assert [r["launch_id"] for r in loop.records()] == [other["launch_id"]]
        assert not [p for p, x in reaper.tree(proc.pid).items() if x.state == "Z"]
    finally:
        err = stop(loop, proc)
    assert proc.returncode == 0, err
    assert err.count(f"settled launch {killed['launch_id']}") == 1, err
    assert "its launch's worker ended (signal 9) unreported" in err
    [final] = [f for f in loop.records("finished") if f["launch_id"] == killed["launch_id"]]
    assert final["outcome"] == "released"
    handoff = loop.attempt(killed["attempt"])["attempt"]["handoff"]
    assert "ended while no supervisor watched it" in handoff
    assert loop.records() == [] and loop.leftovers() == []
