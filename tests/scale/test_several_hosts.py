"""Several hosts, faults included (issue 16): one PostgreSQL, the service as two processes
(`serve --workers 2`: two workers sharing one listening socket, as it is deployed), and three
supervisor "hosts", each `agentc-supervisor run` in a network namespace of its own reaching the
service through a veth pair, work a batch of general tasks (review_mode none: a submission ends
the task done) with a scripted ``command:`` agent while the test kills one worker (SIGKILL: its
connections break mid-request, the other worker keeps accepting from the socket, the master
starts a replacement), cuts one host off for longer than a lease and restarts PostgreSQL. Every
task ends done exactly once, no task ever has two attempts active at once, no cost row is counted
twice.

The scripted agent retries an uncertain submission with `agent-coordinator retry` (exit 7 is the
client's contract for "no definitive answer; the mutation stays pending"). The `command:` harness
calls no model, so the cost rows are seeded in each host's gateway ledger after the run and
reported from inside the hosts (twice: the second pass finds only duplicates)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from agentc.gateway.ledger import Ledger
from tests.client.kit import admin_project, issue_token, make_clone, write_credentials
from tests.kit import pg
from tests.kit.live import LiveServer, children, live_server
from tests.scale.kit import Host, restart_pg
from tests.supervisor.kit import make_kit
from tests.supervisor.loop.kit import LoopKit, agent_run, ledger_call, write_agent

pytestmark = [pytest.mark.root, pytest.mark.postgres, pytest.mark.slow]

KEEP = "for h in {0}/h*; do cp -r $h/kit/state/loop {1}/$(basename $h)-loop; done"
TASKS = 12
LEASE = 30  # the shortest lease a project may have
# Submits a general result (retrying it while the answer is uncertain); while a `hold` file
# sits beside it, it waits first (printing an event now and then, so the loop does not drain it
# for silence).
AGENT = """#!/bin/sh
set -e
cat > "$TMPDIR/prompt.md"
echo '{"type": "agent", "step": "start"}'
here=$(dirname "$0")
while [ -e "$here/hold" ]; do echo '{"type": "agent", "step": "held"}'; sleep 1; done
cat > "$TMPDIR/submission.json" <<'JSON'
{"summary": "done", "acceptance_evidence": [{"criterion": "it works", "evidence": "ran"}]}
JSON
# Exit 7 is a transport or temporary failure (a killed service process, a restarting
# database): the mutation stays pending, and `retry` resends it with its Idempotency-Key.
status=0
agent-coordinator submissions general --input "$TMPDIR/submission.json" --json \\
    > "$TMPDIR/submitted.json" || status=$?
tries=0
while [ "$status" = 7 ] && [ "$tries" -lt 60 ]; do
    sleep 1
    tries=$((tries + 1))
    status=0
    agent-coordinator retry --json > "$TMPDIR/submitted.json" || status=$?
done
[ "$status" = 0 ] || exit "$status"
echo '{"type": "agent", "step": "submitted"}'
"""


def wait_for(check: Any, what: Any, seconds: float = 150) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        time.sleep(0.2)


def query(database: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    for _ in range(100):  # PostgreSQL may be restarting
        try:
            with psycopg.connect(database, connect_timeout=3) as conn:
                return conn.execute(sql, args).fetchall()
        except psycopg.OperationalError:
            time.sleep(0.2)
    raise AssertionError("the database never answered")


@pytest.fixture
def own_pg() -> Iterator[pg.PgServer]:
    """A PostgreSQL of this test's own (it is restarted mid-test)."""
    server = pg.start()
    try:
        yield server
    finally:
        pg.stop(server)


def make_host(
    index: int,
    root: Path,
    live: LiveServer,
    admin: httpx.Client,
    project: str,
    origin: Path,
    host: Host,
) -> LoopKit:
    kit = make_kit(root / "kit")
    token = issue_token(admin, f"host{index}-{uuid.uuid4().hex[:6]}", project, "supervised")
    write_credentials(kit.state / "impl/coordinator", host.url, token)
    program = write_agent(root, AGENT)
    top = {"coordinator_listen": host.url.removeprefix("http://")}
    loop = LoopKit(
        kit,
        live,
        admin,
        project,
        origin,
        program,
        root / "supervisor.toml",
        agent_run(program, poll_seconds=1),
        top=top,
        binding_url=host.url,
    )
    loop.write_config()
    return loop


def test_three_hosts_two_services_and_faults_end_every_task_done_once(
    own_pg: pg.PgServer, tmp_path: Path
) -> None:
    database = own_pg.create_database("hosts")
    tag = f"{os.getpid() % 1000}"
    roots = Path(f"/tmp/sh{tag}")
    hosts = [Host(i, tag) for i in range(3)]
    loops: list[subprocess.Popen[str]] = []
    with ExitStack() as stack:
        stack.callback(lambda: subprocess.run(["rm", "-rf", str(roots)]))
        # The loops' records and the kept logs of unsubmitted launches, for a failure's reader.
        stack.callback(lambda: subprocess.run(["sh", "-c", KEEP.format(roots, tmp_path)]))
        service = stack.enter_context(live_server(database, tmp_path, "--workers", "2"))
        master = service.process.pid
        wait_for(lambda: len(children(master)) == 2, "two workers")
        for host in hosts:
            stack.callback(host.down)
            host.up([int(service.url.rsplit(":", 1)[1])])

        def stop_loops() -> None:
            for proc in loops:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                proc.wait()

        stack.callback(stop_loops)
        admin = service.admin_client()
        stack.callback(admin.close)
        project = admin_project(admin, review_mode="none", lease_seconds=LEASE)
        origin, _ = make_clone(roots / "repo")
        kits = [
            make_host(i, roots / f"h{i}", service, admin, project, origin, host)
            for i, host in enumerate(hosts)
        ]
        task_ids = []
        for i in range(TASKS):
            resp = admin.post(
                f"/api/v1/projects/{project}/tasks",
                json={"title": f"t{i}", "kind": "general", "acceptance_criteria": ["it works"]},
                headers={"Idempotency-Key": f"t{i}"},
            )
            assert resp.status_code == 201, resp.text
            task_ids.append(resp.json()["data"]["task"]["id"])
        held = kits[2].agent.parent / "hold"  # the host cut off keeps its first task
        held.touch()
        logs = [tmp_path / f"loop{host.index}.log" for host in hosts]

        def start_loop(index: int) -> None:
            log = logs[index].open("w")
            stack.callback(log.close)
            loop = kits[index]
            loops.append(
                subprocess.Popen(
                    [*hosts[index].exec(), *loop.argv("run")],
                    env=loop.env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                    cwd="/",
                )
            )

        def done() -> int:
            rows = query(
                database,
                "SELECT count(*) FROM tasks WHERE project_id = %s AND phase = 'done'",
                project,
            )
            return int(rows[0][0])

        def tails() -> str:
            """The end of each loop's log, without its idle polls (a failure's reader)."""

            def told(p: Path) -> str:
                lines = [x for x in p.read_text().splitlines() if not x.endswith(": Idle")]
                return "\n".join(lines)[-3000:]

            return "\n".join(f"{p}:\n{told(p)}" for p in logs if p.exists())

        def active_of_host2() -> list[tuple[Any, ...]]:
            return query(
                database,
                "SELECT a.id, a.task_id, a.generation FROM attempts a "
                "JOIN principals p ON p.id = a.owner_id "
                "WHERE a.project_id = %s AND a.state = 'active' AND p.name LIKE 'host2-%%'",
                project,
            )

        def host2_running() -> tuple[Any, ...] | None:
            """Host 2's active attempt, once its launch (the held agent) has started."""
            rows = active_of_host2()
            started = {r["attempt"] for r in kits[2].records() if r.get("pid")}
            return rows[0] if rows and rows[0][0] in started else None

        # 1. Host 2's agent holds an attempt; the host is cut off the network (for longer than
        # a lease), and the other two hosts start.
        start_loop(2)
        cut_attempt, cut_task, cut_generation = wait_for(
            host2_running, lambda: f"host 2's launch\n{tails()}"
        )
        hosts[2].cut()
        start_loop(0)
        start_loop(1)
        # 2. One service worker is killed while the hosts work: the requests it held fail
        # (the loops' clients retry), the other worker goes on accepting from the shared
        # socket, and the master starts a replacement.
        wait_for(lambda: done() >= 3, lambda: f"3 done\n{tails()}")
        victim = min(children(master))
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: len(children(master)) == 2 and victim not in children(master),
            lambda: f"a replacement worker\n{service.log.read_text()[-2000:]}",
        )
        assert f"worker pid {victim} was killed by signal 9" in service.log.read_text()
        # 3. PostgreSQL restarts under the service (every connection cut).
        wait_for(lambda: done() >= 6, lambda: f"6 done\n{tails()}")
        restart_pg(own_pg)

        # 4. The cut host's attempt expires and another host recovers its task and ends it.
        def recovered() -> bool:
            rows = query(
                database,
                "SELECT generation, state FROM attempts WHERE task_id = %s ORDER BY generation",
                cut_task,
            )
            return len(rows) > 1 and rows[-1][1] == "submitted"

        wait_for(recovered, lambda: f"the cut task recovered\n{tails()}")
        wait_for(lambda: done() == TASKS, lambda: f"{done()} done\n{tails()}")
        # 5. The host comes back: its loop's next renewal with the old generation is refused,
        # the launch is drained, and the release that follows is refused too.
        hosts[2].mend()
        wait_for(
            lambda: kits[2].records() == [],
            lambda: f"host 2's launch ending: {kits[2].records()}\n{tails()}",
        )
        text = logs[2].read_text()
        refused = f"stopped renewing attempt {cut_attempt}: the attempt is no longer renewable"
        assert f"{refused} (lease_expired; state expired)" in text, text
        [final] = [r for r in kits[2].records("finished") if r["attempt"] == cut_attempt]
        assert final["outcome"] == "left as it is (expired)", final
        held.unlink()

        # Every task is done, by exactly one submission.
        states = query(
            database, "SELECT id, lifecycle, phase FROM tasks WHERE project_id = %s", project
        )
        assert sorted(r[0] for r in states) == sorted(task_ids)
        assert {(r[1], r[2]) for r in states} == {("done", "done")}, states
        submissions = query(
            database,
            "SELECT s.task_id, s.attempt_id FROM submissions s JOIN tasks t ON t.id = s.task_id "
            "WHERE t.project_id = %s",
            project,
        )
        assert Counter(r[0] for r in submissions) == Counter(task_ids), submissions
        assert cut_attempt not in {r[1] for r in submissions}
        # No task ever had two attempts active at once: each ended before the next began.
        attempts = query(
            database,
            "SELECT task_id, generation, state, created_at, ended_at, outcome FROM attempts "
            "WHERE project_id = %s ORDER BY task_id, generation",
            project,
        )
        print(json.dumps([list(a) for a in attempts], default=str))
        by_task: dict[str, list[tuple[Any, ...]]] = {}
        for row in attempts:
            by_task.setdefault(row[0], []).append(row)
        for rows in by_task.values():
            assert [r[2] for r in rows][-1] == "submitted", rows
            assert all(r[4] is not None for r in rows), rows
            for before, after in zip(rows, rows[1:], strict=False):
                assert before[4] <= after[3], rows
        cut_rows = by_task[cut_task]
        assert cut_rows[0][1] == cut_generation and cut_rows[0][2] != "submitted", cut_rows
        # No cost row is counted twice: each launch's gateway calls (two per launch, seeded in
        # its host's ledger once the loops are stopped) are reported from inside its host,
        # then reported again with the loop's memory of what it sent lost.
        stop_loops()
        launched = 0
        for host, loop in zip(hosts, kits, strict=True):
            (loop.state / "gateway").mkdir(exist_ok=True)
            ledger = Ledger(loop.state / "gateway/ledger.jsonl")
            for final in loop.records("finished"):
                call = ledger_call(
                    final["launch_id"], final["attempt"], final["generation"], final["task"]
                )
                ledger.append(call)
                ledger.append(call)
                launched += 1
            first = report_costs(host, loop)
            assert first["pending"] == 0 and first["quarantined"] == 0, first
            (loop.state / "loop/costs.reported").unlink()
            again = report_costs(host, loop)
            assert again["accepted"] == 0 and again["duplicates"] == first["accepted"], again
        costs = query(
            database,
            "SELECT host, identity FROM telemetry_rows WHERE project_id = %s AND stream = 'cost'",
            project,
        )
        assert len(costs) == len(set(costs)) == launched, costs


def report_costs(host: Host, loop: LoopKit) -> dict[str, int]:
    out = subprocess.run(
        [*host.exec(), *loop.argv("report-costs")],
        env=loop.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    summary: dict[str, int] = json.loads(out.stdout)
    return summary
