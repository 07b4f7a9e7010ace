"""Stopping a loop with several launches running (issue 33), on SQLite and PostgreSQL: a
drain stops and releases each once; the kill switch and quiet hours (SQLite only) hold new
claims while the running launches finish; after ``kill -9`` of the loop with three live
launches, every launch died with it and the next loop settles each exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from agentc.supervisor.loop.records import LaunchRecord, may_be_alive, now_ms
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import GATED_AGENT, HANGING_AGENT, LoopKit, make_loop_kit


@pytest.fixture
def admin(live: LiveServer) -> Iterator[httpx.Client]:
    """A signed-in admin of this test's own coordinator (each backend)."""
    client = live.admin_client()
    yield client
    client.close()


def _dead(pid: int) -> bool:
    """The process is gone (or a zombie nobody reaped yet: it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_a_drain_stops_every_running_launch_renewed_meanwhile_and_releases_each_once(
    live: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    # A short lease: each launch's worker renews its own attempt while the other runs.
    loop = make_loop_kit(short_tmp, live, admin, HANGING_AGENT, policy={"lease_seconds": 30})
    loop.write_config(launches=2, poll_seconds=1, drain_seconds=1)
    tasks = {loop.task(f"task {n}")["id"] for n in range(2)}
    proc = loop.run_forever()
    try:
        records = loop.wait_for(lambda: loop.running(2), why=loop.log.read_text)
        attempts = {r["attempt"] for r in records}
        loop.wait_for(
            lambda: set(loop.recorded("attempt.renewed")) >= attempts, why=loop.log.read_text
        )
    finally:
        err = loop.stop(proc)
    assert proc.returncode == 0, err
    finished = {f["launch_id"]: f for f in loop.records("finished")}
    assert set(finished) == {r["launch_id"] for r in records}
    for record in records:
        assert finished[record["launch_id"]]["outcome"] == "released"
        handoff = loop.attempt(record["attempt"])["attempt"]["handoff"]
        assert "the host supervisor stopped" in handoff
        assert _dead(record["pid"])
    assert sorted(loop.recorded("attempt.released")) == sorted(attempts)  # each once
    assert {loop.show(t)["work_status"] for t in tasks} == {"ready"}
    assert loop.records() == [] and loop.leftovers() == []
    assert err.count("stopped renewing attempt") == 2, err


def _hold_two_then_free_one(loop: LoopKit, why_held: str, hold: Callable[[], object]) -> None:
    """Three tasks, two slots: both launches start; ``hold()`` (the gate closing) runs while
    they do; one launch is let go, and its freed slot is not filled: the next poll's admission
    holds (its heartbeat says ``why_held``); the other then finishes too."""
    tasks = [loop.task(f"task {n}")["id"] for n in range(3)]
    proc = loop.run_forever()
    try:
        first, second = loop.wait_for(lambda: loop.running(2), why=loop.log.read_text)
        hold()
        loop.let_go(first)
        loop.wait_for(lambda: why_held in loop.heartbeat()["holds"], why=loop.log.read_text)
        assert [r["launch_id"] for r in loop.records()] == [second["launch_id"]]
        loop.let_go(second)
        loop.wait_for(lambda: len(loop.records("finished")) == 2 and not loop.records())
        time.sleep(2)  # more polls: still nothing claimed
        assert loop.records() == []
    finally:
        err = loop.stop(proc)
    assert proc.returncode == 0, err
    waiting = [t for t in tasks if loop.show(t)["work_status"] == "waiting_review"]
    assert len(waiting) == 2, err
    [left] = [t for t in tasks if t not in waiting]
    assert loop.show(left)["work_status"] == "ready"


def test_the_kill_switch_holds_new_claims_while_running_launches_finish(
    live: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, live, admin, GATED_AGENT)
    loop.write_config(launches=2, poll_seconds=1)
    _hold_two_then_free_one(loop, "kill_switch", (loop.state / "kill-switch").touch)


# On SQLite only: the window is the loop's own rule, read from its clock; the kill switch's
# test above holds new claims the same way against both backends.
@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
@pytest.mark.slow
def test_quiet_hours_hold_new_claims_while_running_launches_finish(
    live: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """The window is open when the launches start and closes while they run (at a minute's
    edge 30 to 90 seconds away)."""
    now = datetime.now()
    end = (now + timedelta(seconds=90)).replace(second=0, microsecond=0)
    window = f"{now - timedelta(hours=1):%H:%M}-{end:%H:%M}"
    loop = make_loop_kit(short_tmp, live, admin, GATED_AGENT, health={"quiet_hours": window})
    loop.write_config(launches=2, poll_seconds=1)

    def closed() -> None:
        while datetime.now() < end + timedelta(seconds=1):
            time.sleep(0.5)

    _hold_two_then_free_one(loop, "quiet_hours", closed)


def test_kill_9_with_three_live_launches_settles_each_exactly_once(
    live: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, live, admin, HANGING_AGENT)
    loop.write_config(launches=3, poll_seconds=1)
    tasks = {loop.task(f"task {n}")["id"] for n in range(3)}
    proc = loop.run_forever()
    try:
        records = loop.wait_for(lambda: loop.running(3), why=loop.log.read_text)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    # Every worker and every sandbox died with the loop; the records say so.
    for record in records:
        loop.wait_for(lambda r=record: _dead(r["loop_pid"]) and _dead(r["pid"]))
        kept = LaunchRecord.from_json(record)
        assert not may_be_alive(kept, boot=kept.boot_id, now=now_ms())
    assert {loop.show(t)["work_status"] for t in tasks} == {"in_progress"}
    (loop.state / "kill-switch").touch()  # settle, then claim nothing
    first = loop.once()
    assert first.returncode == 0, first.stderr
    for record in records:
        assert first.stderr.count(f"settled launch {record['launch_id']}") == 1, first.stderr
    again = loop.once()
    assert again.returncode == 0 and "settled launch" not in again.stderr, again.stderr
    attempts = sorted(r["attempt"] for r in records)
    assert sorted(loop.recorded("attempt.released")) == attempts  # each released once
    for record in records:
        handoff = loop.attempt(record["attempt"])["attempt"]["handoff"]
        assert "ended while no supervisor watched it" in handoff
    assert {loop.show(t)["work_status"] for t in tasks} == {"ready"}
    assert {f["launch_id"] for f in loop.records("finished")} == {r["launch_id"] for r in records}
    assert loop.records() == [] and loop.leftovers() == []
