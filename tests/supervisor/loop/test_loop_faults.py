"""Faults of the live loop with real parts: a hanging agent is drained, a killed loop is
recovered by the next one, the kill switch stops claims, a full disk stops claims."""

from __future__ import annotations

import json
import os
import signal
import threading
import tomllib
from pathlib import Path

import httpx

from tests.client.kit import DroppingProxy, admin_get
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import HANGING_AGENT, SUBMITTING_AGENT, LoopKit, make_loop_kit


def _helpers_of(launch_id: str) -> list[int]:
    """The pids of agentc-push helpers serving ``launch_id``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"agentc.push.cli" in cmdline and f"--launch={launch_id}".encode() in cmdline:
            found.append(int(entry.name))
    return found


def read_credentials(path: Path) -> str:
    """The one token of a client credentials file."""
    token: str = tomllib.loads(path.read_text())["credentials"][0]["token"]
    return token


def _attempt_events(loop: LoopKit, admin: httpx.Client, attempt_id: str) -> list[str]:
    """The kinds of the attempt's audit events, oldest first, without its renewals."""
    seen = admin_get(admin, f"/api/v1/projects/{loop.project}/events?limit=200")["items"]
    return [
        e["kind"]
        for e in seen
        if e["record_id"] == attempt_id
        and e["kind"] not in ("attempt.renewed", "checkout.registered")
    ]


def _handoff(loop: LoopKit, attempt_id: str) -> str:
    detail = loop.attempt(attempt_id)
    handoff: str = detail["attempt"]["handoff"] or ""
    return handoff


def test_a_hanging_agent_without_events_is_drained_and_released(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT)
    loop.write_config(events_stale_seconds=1, drain_seconds=1)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "stopped renewing attempt" in result.stderr and "no harness events" in result.stderr
    [final] = loop.records("finished")
    assert final["outcome"] == "released" and final["pid"]
    handoff = _handoff(loop, final["attempt"])
    assert "after a drain (no harness events" in handoff
    assert "Read the last checkpoint before resuming." in handoff
    assert loop.show(task["id"])["work_status"] == "ready"
    assert loop.leftovers() == []
    # The launch's credential was revoked before its attempt was released.
    assert _attempt_events(loop, admin, final["attempt"]) == [
        "attempt.claimed",
        "attempt_credential.minted",
        "attempt_credential.revoked",
        "attempt.released",
    ]


def test_kill_9_during_the_launch_is_recovered_by_the_next_loop(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT)
    task = loop.task()
    proc = loop.start()
    try:
        record = loop.wait_for(lambda: [r for r in loop.records() if r.get("pid")])[0]
        events = loop.state / "impl/runs" / record["launch_id"] / "events.jsonl"
        loop.wait_for(lambda: events.exists() and events.read_text())
        run = loop.state / "impl/runs" / record["launch_id"]
        [given] = [read_credentials(p) for p in run.glob("state/coordinator/**/credentials.toml")]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    events_mtime = events.stat().st_mtime
    # The launch was given its attempt's credential, not the role's.
    assert given != read_credentials(loop.state / "impl/coordinator/credentials.toml")
    attempt_url = f"{server.url}/api/v1/projects/{loop.project}/attempts/{record['attempt']}"
    bearer = {"Authorization": f"Bearer {given}"}
    assert httpx.get(attempt_url, headers=bearer).status_code == 200
    # The launch died with its loop (bwrap --die-with-parent), and so did its candidate push
    # helper (a parent-death signal): nothing of either may still run.
    loop.wait_for(lambda: not os.path.exists(f"/proc/{record['pid']}"))
    loop.wait_for(lambda: not _helpers_of(record["launch_id"]), why="agentc-push still runs")
    push_dirs = [p for p in (loop.state / "push").iterdir() if not p.name.startswith(".")]
    assert push_dirs, "the killed launch's push-helper directory is left for the next poll"
    assert loop.show(task["id"])["work_status"] == "in_progress"
    assert (loop.state / "impl/runs" / record["launch_id"]).is_dir()
    (loop.state / "kill-switch").touch()  # settle, but claim nothing afterwards
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert f"settled launch {record['launch_id']}" in result.stderr
    assert "the kill switch is set" in result.stderr
    assert loop.records() == [] and loop.leftovers() == []
    assert loop.show(task["id"])["work_status"] == "ready"
    handoff = _handoff(loop, record["attempt"])
    assert "ended while no supervisor watched it" in handoff
    assert [p for p in (loop.state / "push").iterdir() if not p.name.startswith(".")] == []
    # The restarted loop revoked the dead launch's credential before it released the attempt.
    assert httpx.get(attempt_url, headers=bearer).status_code == 401
    kinds = _attempt_events(loop, admin, record["attempt"])
    assert kinds.index("attempt_credential.revoked") < kinds.index("attempt.released"), kinds
    # What the launch did is recorded as its own loop would have: its run, ending released.
    run = _run(loop, record["attempt"])
    assert (run["ending"], run["harness"], run["steps"]) == ("released", "command", [])
    assert str(run["why"]).startswith("its launch ended while no supervisor watched it")
    assert str(run["why"]).endswith("the supervisor released the attempt")
    # its duration runs from the launch's start to its stream's last write, not to the settling
    assert run["started_at_ms"] == record["started_ms"]
    assert run["duration_ms"] == int(events_mtime * 1000) - int(record["started_ms"])
    assert "recorded 0 steps (released)" in result.stderr


def test_a_launch_that_submitted_before_its_loop_died_gets_its_patch_and_run(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """The agent submitted, then its loop died before settling: the next loop records the
    submission's patch and the run (ending submitted), as the dead loop would have."""
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT + "exec sleep 600\n")
    task = loop.task()
    proc = loop.start()
    try:
        record = loop.wait_for(lambda: [r for r in loop.records() if r.get("pid")])[0]
        loop.wait_for(lambda: loop.show(task["id"])["work_status"] != "in_progress")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    loop.wait_for(lambda: not os.path.exists(f"/proc/{record['pid']}"))
    (loop.state / "kill-switch").touch()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert (
        f"settled launch {record['launch_id']} (task {task['id']}): left as it is (submitted)"
        in (result.stderr)
    )
    assert "recorded the patch (1 files)" in result.stderr, result.stderr
    patch = admin_get(
        admin, f"/api/v1/projects/{loop.project}/attempts/{record['attempt']}/artifacts/patch"
    )
    assert [f["path"] for f in patch["files"]] == ["greeting.txt"] and "+hi" in patch["patch"]
    run = _run(loop, record["attempt"])
    assert run["ending"] == "submitted"
    assert "its launch ended while no supervisor watched it" in str(run["why"])
    assert loop.records() == [] and loop.leftovers() == []


def _run(loop: LoopKit, attempt: str) -> dict[str, object]:
    """The attempt's recorded run (its steps artifact)."""
    path = f"/api/v1/projects/{loop.project}/attempts/{attempt}/artifacts/steps"
    run: dict[str, object] = admin_get(loop.admin, path)
    return run


def test_kill_9_right_after_the_claim_is_recovered(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """Killed as soon as the launch record exists (before or after the spawn): the next loop
    releases the attempt if one was claimed and removes everything."""
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT)
    task = loop.task()
    proc = loop.start()
    try:
        record = loop.wait_for(loop.records)[0]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    (loop.state / "kill-switch").touch()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert f"settled launch {record['launch_id']}" in result.stderr
    assert loop.records() == [] and loop.leftovers() == []
    assert loop.show(task["id"])["work_status"] == "ready"


def test_a_live_launch_is_never_started_twice(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT)
    loop.task()
    loop.write_config(drain_seconds=1)
    first = loop.start()
    try:
        record = loop.wait_for(lambda: [r for r in loop.records() if r.get("pid")])[0]
        second = loop.once()
        assert second.returncode == 0, second.stderr
        assert "an earlier launch may still run" in second.stderr
        assert record["launch_id"] in second.stderr
        assert len(loop.records()) == 1
    finally:
        first.send_signal(signal.SIGTERM)  # drains, releases and exits
        _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert "the host supervisor stopped" in err
    [final] = loop.records("finished")
    assert final["outcome"] == "released"
    assert "the host supervisor stopped" in _handoff(loop, final["attempt"])
    assert loop.leftovers() == []


def test_the_kill_switch_stops_claims_within_one_poll(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    task = loop.task()
    os.symlink("/nonexistent", loop.state / "kill-switch")  # anything at the path counts
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "the kill switch is set" in result.stderr
    assert loop.show(task["id"])["work_status"] == "ready"
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert "kill switch" in beat["outcome"]


def test_a_full_disk_stops_claims(server: LiveServer, admin: httpx.Client, short_tmp: Path) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    task = loop.task()
    loop.write_config(min_free_mib=1 << 40)  # more than any disk here has free
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "MiB free (min_free_mib is" in result.stderr
    assert loop.show(task["id"])["work_status"] == "ready"


GIVING_UP_AGENT = '#!/bin/sh\ncat > /dev/null\necho \'{"type": "agent", "step": "gave up"}\'\n'


def test_empty_exits_hold_the_task_then_the_host(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, GIVING_UP_AGENT)
    task = loop.task()
    for n in range(2):
        result = loop.once()
        assert result.returncode == 0 and "exit_code: 0" in result.stderr, result.stderr
        # The coordinator backs the task off after an attempt without a submission: the next
        # poll is idle until the delay passes (or a person puts the task back).
        assert loop.show(task["id"])["fruitless_attempts"] == 1
        idle = loop.once()
        assert ": Idle" in idle.stderr, idle.stderr
        loop.put_back(task["id"], f"again ({n})")
    finals = loop.records("finished")
    assert [f["outcome"] for f in finals] == ["released", "released"]
    handoff = _handoff(loop, finals[0]["attempt"])
    assert "exited with code 0" in handoff and "logs are kept in" in handoff
    kept = loop.state / "loop/unsubmitted" / finals[0]["launch_id"] / "events.jsonl"
    assert "gave up" in kept.read_text()
    held = loop.once()
    assert f"task {task['id']} is held" in held.stderr, held.stderr
    assert loop.show(task["id"])["work_status"] == "ready"
    counts = json.loads((loop.state / "loop/unsubmitted.json").read_text())
    assert counts == {"tasks": {task["id"]: 2}, "total": 2}
    # Past the total limit the host claims nothing, whatever the task.
    loop.write_config(empty_exit_limit=0, empty_exit_total_limit=2)
    other = loop.task("another task")
    stopped = loop.once()
    assert "launches in a row exited without a submission" in stopped.stderr, stopped.stderr
    assert loop.show(other["id"])["work_status"] == "ready"
    # The operator fixes the cause and removes the file: claims resume.
    (loop.state / "loop/unsubmitted.json").unlink()
    assert "exit_code: 0" in loop.once().stderr


# Prints an event every 0.2 s until the test drops ``go`` into its clone, then submits.
WAITING_AGENT = """#!/bin/sh
cat > /dev/null
while [ ! -e go ]; do echo '{"type": "agent", "step": "waiting"}'; sleep 0.2; done
""" + SUBMITTING_AGENT.split('cat > "$TMPDIR/prompt.md"\n', 1)[1]


def test_renewals_back_off_while_the_coordinator_is_down_and_resume(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    proxy = DroppingProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        loop = make_loop_kit(
            short_tmp,
            server,
            admin,
            WAITING_AGENT,
            policy={"lease_seconds": 30},  # renew every 10 s
            coordinator_listen=proxy.url[7:],
        )
        loop.binding_url = proxy.url
        loop.write_config()
        creds = loop.state / "impl/coordinator/credentials.toml"
        creds.write_text(creds.read_text().replace(server.url, proxy.url))
        task = loop.task()
        proc = loop.start()
        lines: list[str] = []

        def read() -> None:
            for line in proc.stderr or []:
                lines.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        seen = lambda: "".join(lines)  # noqa: E731
        record = loop.wait_for(lambda: [r for r in loop.records() if r.get("pid")], why=seen)[0]
        proxy.refuse = True  # the coordinator is unreachable for the loop
        loop.wait_for(lambda: any("renewing" in x and "failed" in x for x in list(lines)), 60, seen)
        before = _renewed(loop, record["attempt"])
        proxy.refuse = False
        loop.wait_for(lambda: _renewed(loop, record["attempt"]) > before, 60, seen)
        (loop.state / "impl/clones" / record["launch_id"] / "go").touch()
        proc.wait(timeout=120)
        reader.join(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        assert proc.returncode == 0, "".join(lines)
        assert "stopped renewing" not in "".join(lines)
        assert loop.show(task["id"])["work_status"] == "waiting_review", loop.tails()
    finally:
        proxy.close()


def _renewed(loop: LoopKit, attempt: str) -> int:
    events = loop.admin.get(f"/api/v1/projects/{loop.project}/events").json()["data"]["items"]
    return sum(1 for e in events if e["kind"] == "attempt.renewed" and e["record_id"] == attempt)
