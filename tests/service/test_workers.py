"""`serve --workers N`: several service processes on one socket, on PostgreSQL only.

Many agents claim, renew and submit over real HTTP against two worker processes; both workers
answer (each holds some of the agents' connections, read from /proc), one worker is killed
mid-run (the master starts another, the agents retry with the same Idempotency-Key), and every
task is still claimed exactly once. Concurrent creates, one claim sent on many connections
with one key, and stale generations meet the admission budget, the receipt and the fence
whichever worker answers. On SQLite, --workers above 1 is refused before anything is touched.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kit.live import SERVER, LiveServer, children, live_server
from tests.kit.pg import PgServer

AGENTS = 16
TASKS = 64
KILL_AFTER = TASKS // 3  # claims made before one worker is killed


def established(port: int) -> set[str]:
    """The socket inodes of established TCP connections whose local port is `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                found.add(inode)
    return found


def connections_of(pid: int, port: int) -> int:
    """How many of the server's established connections the process `pid` holds."""
    inodes = established(port)
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            held += 1
    return held


def wait_for(check: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def two_workers(pg_server: PgServer, tmp_path: Path) -> Iterator[LiveServer]:
    database = pg_server.create_database(f"workers_{os.getpid()}_{time.monotonic_ns()}")
    with live_server(database, tmp_path, "--workers", "2") as server:
        master = server.process.pid
        wait_for(lambda: len(children(master)) == 2, "two workers")
        yield server


class Agent:
    """One agent on one keep-alive connection; a request that meets a dead connection is sent
    again with the same Idempotency-Key (the receipt makes the second one a replay)."""

    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(
            base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"}
        )
        self.keys = iter(range(10**6))
        self.retries = 0

    def post(self, path: str, body: Any, *expected: int) -> Any:
        key = f"k{next(self.keys)}"
        for _ in range(50):
            try:
                resp = self.client.post(path, json=body, headers={"Idempotency-Key": key})
            except httpx.TransportError:
                self.retries += 1
                time.sleep(0.05)
                continue
            if resp.status_code == 503:
                self.retries += 1
                time.sleep(0.05)
                continue
            assert resp.status_code in (expected or (200,)), resp.text
            return resp.json()["data"]
        raise AssertionError(f"POST {path} never got an answer")


@pytest.mark.postgres
def test_two_workers_claim_each_task_once_and_survive_a_killed_worker(
    two_workers: LiveServer,
) -> None:
    live = two_workers
    master = live.process.pid
    port = int(live.url.rsplit(":", 1)[1])
    admin = live.admin_client()
    try:
        pid = admin.post(
            "/api/v1/projects",
            json={"name": "workers", "repository_url": "https://x/y"},
            headers={"Idempotency-Key": "p"},
        ).json()["data"]["id"]
        for i in range(TASKS):
            resp = admin.post(
                f"/api/v1/projects/{pid}/tasks",
                json={"title": f"t{i}", "kind": "general", "acceptance_criteria": ["it works"]},
                headers={"Idempotency-Key": f"t{i}"},
            )
            assert resp.status_code == 201, resp.text
        tokens = [
            admin.post(
                "/api/v1/admin/agents",
                json={"name": f"worker-agent-{i}", "projects": [pid]},
                headers={"Idempotency-Key": f"a{i}"},
            ).json()["data"]["token"]
            for i in range(AGENTS)
        ]
    finally:
        admin.close()

    agents = [Agent(live.url, token) for token in tokens]
    for agent in agents:
        session = agent.post("/api/v1/sessions", {"harness": "workers"}, 201)
        agent.client.headers.update(
            {
                "X-Coordinator-Session": session["session_id"],
                "X-Coordinator-Session-Proof": session["proof"],
            }
        )

    # Both workers answered: each holds some of the agents' keep-alive connections (more
    # connections are opened while the kernel has given them all to one worker).
    workers = children(master)
    probes: list[socket.socket] = []
    while not all(connections_of(w, port) for w in workers) and len(probes) < 200:
        probe = socket.create_connection(("127.0.0.1", port))
        probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert probe.recv(64).startswith(b"HTTP/1.1 200")
        probes.append(probe)
    held = {w: connections_of(w, port) for w in workers}
    assert all(held.values()), held
    for probe in probes:
        probe.close()

    claimed: Counter[str] = Counter()
    lock = threading.Lock()
    killed = threading.Event()
    base = f"/api/v1/projects/{pid}"

    def work(agent: Agent) -> None:
        while True:
            claim = agent.post(f"{base}/claims", {}, 200, 201)["claim"]
            if claim is None:
                return
            attempt = claim["attempt"]
            with lock:
                claimed[claim["task"]["id"]] += 1
            path = f"{base}/attempts/{attempt['id']}"
            agent.post(f"{path}/renew", {"generation": attempt["generation"]})
            agent.post(
                f"{path}/submissions",
                {
                    "generation": attempt["generation"],
                    "kind": "general",
                    "summary": "done",
                    "acceptance_evidence": [{"criterion": "it works", "evidence": "checked"}],
                },
                201,
            )

    def kill_one() -> None:
        wait_for(lambda: sum(claimed.values()) >= KILL_AFTER, "the first claims")
        victim = max(workers, key=lambda w: connections_of(w, port))
        os.kill(victim, signal.SIGKILL)
        killed.set()

    threads = [threading.Thread(target=work, args=(a,)) for a in agents]
    killer = threading.Thread(target=kill_one)
    for t in [killer, *threads]:
        t.start()
    for t in [killer, *threads]:
        t.join()
    assert killed.is_set()

    # Every task was claimed exactly once, across both workers and the kill.
    assert sum(claimed.values()) == TASKS
    assert set(claimed.values()) == {1}
    assert sum(a.retries for a in agents) > 0  # the kill did cut some agents off
    reader = agents[0].client
    items = reader.get(f"{base}/tasks?limit=200").json()["data"]["items"]
    assert len(items) == TASKS
    for item in items:
        task = reader.get(f"{base}/tasks/{item['id']}").json()["data"]
        assert task["generation"] == 1, task
        assert len(task["attempts"]) == 1, task
    for agent in agents:
        agent.client.close()

    # The master replaced the killed worker and still serves.
    wait_for(lambda: len(children(master)) == 2, "a replacement worker")
    now_serving = children(master)
    assert now_serving != workers
    assert httpx.get(live.url + "/healthz").status_code == 200
    assert "was killed by signal 9; starting another" in live.log.read_text()
    # SIGTERM to the master stops every worker and ends cleanly.
    live.stop()
    assert live.process.returncode == 0
    assert not [p for p in now_serving if Path(f"/proc/{p}").exists()]


def at_once(count: int, fn: Any) -> list[httpx.Response]:
    """fn(i) for i in range(count), all released together, each on its own connection."""
    answers: list[httpx.Response] = [None] * count  # type: ignore[list-item]
    start = threading.Barrier(count)

    def one(i: int) -> None:
        start.wait()
        answers[i] = fn(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


@pytest.mark.postgres
def test_admission_idempotency_and_fencing_hold_across_two_workers(
    two_workers: LiveServer,
) -> None:
    live = two_workers
    admin = live.admin_client()
    try:
        pid = admin.post(
            "/api/v1/projects",
            json={"name": "rules", "repository_url": "https://x/y", "admit_agent_tasks": True},
            headers={"Idempotency-Key": "p"},
        ).json()["data"]["id"]
        tokens = [
            admin.post(
                "/api/v1/admin/agents",
                json={"name": f"rules-agent-{i}", "projects": [pid]},
                headers={"Idempotency-Key": f"a{i}"},
            ).json()["data"]["token"]
            for i in range(4)
        ]
    finally:
        admin.close()

    def client(token: str) -> httpx.Client:
        return httpx.Client(
            base_url=live.url, timeout=60, headers={"Authorization": f"Bearer {token}"}
        )

    # Admission: 24 agent task creates at once, spread over the workers; the weekly budget (5)
    # admits exactly 5, the project row lock being PostgreSQL's, not a process's.
    def create(i: int) -> httpx.Response:
        with client(tokens[i % len(tokens)]) as c:
            return c.post(
                f"/api/v1/projects/{pid}/tasks",
                json={"title": f"t{i}", "kind": "general", "acceptance_criteria": ["c"]},
                headers={"Idempotency-Key": f"t{i}"},
            )

    created = at_once(24, create)
    assert [r.status_code for r in created] == [201] * 24, [r.text for r in created]
    held = Counter(r.json()["data"]["admission"]["held"] for r in created)
    assert held == {False: 5, True: 19}

    # Idempotency: one claim sent 8 times at once with one key, on 8 connections: one claim,
    # seven replays of the very same answer.
    with client(tokens[0]) as agent:
        session = agent.post(
            "/api/v1/sessions", json={"harness": "rules"}, headers={"Idempotency-Key": "s"}
        ).json()["data"]
        headers = {
            "Authorization": f"Bearer {tokens[0]}",
            "X-Coordinator-Session": session["session_id"],
            "X-Coordinator-Session-Proof": session["proof"],
            "Idempotency-Key": "one-claim",
        }

        def claim(_i: int) -> httpx.Response:
            with httpx.Client(base_url=live.url, timeout=60) as c:
                return c.post(f"/api/v1/projects/{pid}/claims", json={}, headers=headers)

        claims = at_once(8, claim)
        assert [r.status_code for r in claims] == [201] * 8, [r.text for r in claims]
        assert len({r.json()["data"]["claim"]["attempt"]["id"] for r in claims}) == 1
        assert sum(r.headers.get("idempotency-replayed") == "true" for r in claims) == 7
        attempt = claims[0].json()["data"]["claim"]["attempt"]
        task_id = claims[0].json()["data"]["claim"]["task"]["id"]
        agent.headers.update({k: v for k, v in headers.items() if k != "Idempotency-Key"})
        task = agent.get(f"/api/v1/projects/{pid}/tasks/{task_id}").json()["data"]
        assert len(task["attempts"]) == 1

        # Fencing: a write with another generation is refused, whichever worker answers.
        for n in range(4):
            resp = agent.post(
                f"/api/v1/projects/{pid}/attempts/{attempt['id']}/renew",
                json={"generation": attempt["generation"] + 1},
                headers={"Idempotency-Key": f"stale{n}"},
            )
            assert resp.status_code == 409 and resp.json()["error"]["code"] == "lease_expired"


@pytest.mark.parametrize(
    ("where", "env"),
    [
        (("--workers", "2", "serve"), {}),
        (("serve", "--workers", "3"), {}),
        (("serve",), {"COORDINATOR_WORKERS": "2"}),
    ],
)
def test_sqlite_refuses_several_workers(
    tmp_path: Path, where: tuple[str, ...], env: dict[str, str]
) -> None:
    db = tmp_path / "c.sqlite3"
    out = subprocess.run(
        [SERVER, "--database", str(db), "--allow-insecure-loopback", *where],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    assert "SQLite is served by one process" in out.stderr, out.stderr
    assert "PostgreSQL for several processes" in out.stderr
    assert not db.exists()


def test_forked_workers_draw_different_ids() -> None:
    """Ids come from a generator seeded once per process; a forked worker reseeds it, or two
    workers would create records with the same ids (found by bench/lease_ops.py --workers 2)."""
    from agentc.service.ops import new_id

    new_id()  # the parent's generator is in use before the fork
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(write_end, new_id().encode())
        os._exit(0)
    os.close(write_end)
    drawn = os.read(read_end, 100).decode()
    os.close(read_end)
    os.waitpid(child, 0)
    assert drawn and drawn != new_id()
