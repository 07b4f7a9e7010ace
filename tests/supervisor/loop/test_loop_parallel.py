"""Several launches at once (issue 33) in personal mode, with real parts: each launch in a
worker of its own, within ``[run] launches``; each claimed once and settled once; each with its
own cgroup; a killed worker with another launch running; each running launch's spend told
with its renewals (test_loop_parallel_stops.py: a drain, the kill switch, quiet hours and a
killed loop, on both backends)."""

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
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import GATED_AGENT, HANGING_AGENT, make_loop_kit


def cgroup_pids(launch_id: str) -> set[int]:
    """The processes in a launch's cgroups (none where the host gives no cgroup)."""
    limits = LaunchLimits(Limits(), f"agentc-{launch_id}")
    limits.adopt()
    return {int(p) for g in limits.groups for p in (g / "cgroup.procs").read_text().split()}


def test_launches_run_side_by_side_within_the_slots_each_claimed_and_settled_once(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, GATED_AGENT)
    loop.write_config(launches=2, poll_seconds=1)
    tasks = {loop.task(f"task {n}")["id"] for n in range(3)}
    proc = loop.run_forever()
    try:
        first = loop.wait_for(lambda: loop.running(2), why=loop.log.read_text)
        # Two at once, no third: the slots are full (the heartbeat lists both).
        beat = loop.wait_for(
            lambda: len(loop.heartbeat().get("launches", [])) == 2 and loop.heartbeat()
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
        loop.let_go(first[0])
        # Its end frees a slot: the third task is claimed while the second launch still runs.
        ids = {r["launch_id"] for r in first}
        third = loop.wait_for(
            lambda: [r for r in loop.running(2) if r["launch_id"] not in ids],
            why=loop.log.read_text,
        )[0]
        assert third["task"] not in {r["task"] for r in first}
        for record in (first[1], third):
            loop.let_go(record)
        loop.wait_for(lambda: len(loop.records("finished")) == 3 and not loop.records())
    finally:
        err = loop.stop(proc)
    assert proc.returncode == 0, err
    assert "up to 2 launches at once ([run] launches)" in err
    finished = loop.records("finished")
    assert {f["task"] for f in finished} == tasks  # each task once
    assert all(f["outcome"] == "left as it is (submitted)" for f in finished)
    assert len(loop.recorded("attempt.claimed")) == 3  # no task claimed twice
    for task in tasks:
        assert loop.show(task)["work_status"] == "waiting_review"
    assert err.count("ended: Launched {task: ") == 3, err
    assert loop.leftovers() == []


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
        killed, other = loop.wait_for(lambda: loop.running(2), why=loop.log.read_text)
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
        err = loop.stop(proc)
    assert proc.returncode == 0, err
    assert err.count(f"settled launch {killed['launch_id']}") == 1, err
    assert "its launch's worker ended (signal 9) unreported" in err
    [final] = [f for f in loop.records("finished") if f["launch_id"] == killed["launch_id"]]
    assert final["outcome"] == "released"
    handoff = loop.attempt(killed["attempt"])["attempt"]["handoff"]
    assert "ended while no supervisor watched it" in handoff
    assert loop.records() == [] and loop.leftovers() == []


def test_each_running_launch_tells_its_own_spend_with_its_renewals(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """Two launches at once, each with model calls in the gateway's ledger (written here as
    the gateway writes them): each worker meters its own launch and tells it with its renewal;
    the console's task page shows each running attempt's own figure."""
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT, policy={"lease_seconds": 30})
    ledger = short_tmp / "ledger.jsonl"
    loop.top["health"] = {"ledger": str(ledger)}
    loop.write_config(launches=2, poll_seconds=1, drain_seconds=1)
    for n in range(2):
        loop.task(f"task {n}")
    proc = loop.run_forever()
    try:
        records = loop.wait_for(lambda: loop.running(2), why=loop.log.read_text)
        spend = {r["launch_id"]: usd for r, usd in zip(records, (0.25, 1.5), strict=True)}
        with ledger.open("a") as out:
            for launch, usd in spend.items():
                row = {"session": launch, "role": "impl", "usd": usd, "input_tokens": 1000}
                row["output_tokens"] = int(usd * 100)
                out.write(json.dumps(row) + "\n")
                out.write(json.dumps(row) + "\n")

        def page(record: dict[str, Any]) -> str:
            path = f"/console/projects/{loop.project}/tasks/{record['task']}"
            return admin.get(path).text

        for record in records:
            usd = spend[record["launch_id"]]
            tokens = f"{2 * (1000 + int(usd * 100)):,}"
            shown = (
                f'<span class="tokens-now">{tokens}</span> tokens, '
                f'<span class="spent-now">${2 * usd:.2f}</span> spent'
            )
            loop.wait_for(lambda r=record, s=shown: s in page(r), why=loop.log.read_text)
    finally:
        err = loop.stop(proc)
    assert proc.returncode == 0, err
