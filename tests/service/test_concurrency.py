"""64 agents race to claim the same 10 tasks over real HTTP: each task is claimed once."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable

import httpx

from tests.kit.live import LiveServer

AGENTS = 64
TASKS = 10


def _race_set_up(
    live: LiveServer, agents: int, tasks: int
) -> tuple[str, list[str], list[httpx.Client]]:
    """A project with ``tasks`` ready tasks and ``agents`` agents, each with a session."""
    admin = live.admin_client()
    try:
        key = iter(range(10**6))
        pid = admin.post(
            "/api/v1/projects",
            json={"name": "race", "repository_url": "https://x/y"},
            headers={"Idempotency-Key": f"p{next(key)}"},
        ).json()["data"]["id"]
        task_ids = []
        for i in range(tasks):
            resp = admin.post(
                f"/api/v1/projects/{pid}/tasks",
                json={"title": f"t{i}", "acceptance_criteria": ["c"]},
                headers={"Idempotency-Key": f"t{next(key)}"},
            )
            task_ids.append(resp.json()["data"]["task"]["id"])
        tokens = []
        for i in range(agents):
            resp = admin.post(
                "/api/v1/admin/agents",
                json={"name": f"racer-{i}", "projects": [pid]},
                headers={"Idempotency-Key": f"a{next(key)}"},
            )
            tokens.append(resp.json()["data"]["token"])
    finally:
        admin.close()

    clients = []
    for token in tokens:
        c = httpx.Client(
            base_url=live.url, timeout=60, headers={"Authorization": f"Bearer {token}"}
        )
        s = c.post(
            "/api/v1/sessions", json={"harness": "race"}, headers={"Idempotency-Key": "s"}
        ).json()["data"]
        c.headers.update(
            {"X-Coordinator-Session": s["session_id"], "X-Coordinator-Session-Proof": s["proof"]}
        )
        clients.append(c)
    return pid, task_ids, clients


def _at_once(count: int, act: Callable[[int], None]) -> None:
    """act(0) ... act(count - 1), each in a thread of its own, all released together."""
    start = threading.Barrier(count)

    def run(index: int) -> None:
        start.wait()
        act(index)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_each_task_is_claimed_exactly_once(live: LiveServer) -> None:
    pid, task_ids, clients = _race_set_up(live, AGENTS, TASKS)
    wins: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def race(index: int) -> None:
        order = list(task_ids)
        random.Random(index).shuffle(order)
        for n, tid in enumerate(order):
            resp = clients[index].post(
                f"/api/v1/projects/{pid}/claims",
                json={"task_id": tid, "expected_task_revision": 1},
                headers={"Idempotency-Key": f"c{index}-{n}"},
            )
            with lock:
                if resp.status_code == 201:
                    wins[tid] += 1
                    outcomes["won"] += 1
                else:
                    outcomes[resp.json()["error"]["code"]] += 1

    _at_once(len(clients), race)
    for c in clients:
        c.close()

    assert dict(wins) == {tid: 1 for tid in task_ids}
    assert outcomes["won"] == TASKS
    assert outcomes["claim_conflict"] == AGENTS * TASKS - TASKS, outcomes
    admin = live.admin_client()
    try:
        for tid in task_ids:
            task = admin.get(f"/api/v1/projects/{pid}/tasks/{tid}").json()["data"]
            assert task["generation"] == 1
            assert [a["state"] for a in task["attempts"]] == ["active"]
    finally:
        admin.close()


def test_queue_claims_at_once_each_get_a_different_task(live: LiveServer) -> None:
    """24 agents ask for the next task at the same moment, with 24 tasks ready: every one
    gets a task (on PostgreSQL, past the candidates the others hold locked), none twice."""
    pid, task_ids, clients = _race_set_up(live, 24, 24)
    got: list[httpx.Response] = []
    lock = threading.Lock()

    def ask(index: int) -> None:
        resp = clients[index].post(
            f"/api/v1/projects/{pid}/claims", json={}, headers={"Idempotency-Key": f"q{index}"}
        )
        with lock:
            got.append(resp)

    _at_once(len(clients), ask)
    for c in clients:
        c.close()
    assert [r.status_code for r in got] == [201] * len(clients), [r.text for r in got]
    claims = [r.json()["data"]["claim"] for r in got]
    assert None not in claims
    assert sorted(c["task"]["id"] for c in claims) == sorted(task_ids)


def test_claims_at_once_pass_over_the_tasks_that_back_off(live: LiveServer) -> None:
    """Half of 24 tasks just had an attempt released without a submission (they back off for
    a minute). 12 agents ask for the next task while 12 others claim a backing-off task by id,
    all at once: the 12 queue claims get the 12 other tasks, once each (on PostgreSQL past the
    candidates the others hold locked), and every claim by id is refused."""
    pid, task_ids, clients = _race_set_up(live, 24, 24)
    backing, fresh = task_ids[::2], task_ids[1::2]
    claims = f"/api/v1/projects/{pid}/claims"
    for n, tid in enumerate(backing):
        body = {"task_id": tid, "expected_task_revision": 1}
        got = clients[0].post(claims, json=body, headers={"Idempotency-Key": f"b{n}"})
        attempt = got.json()["data"]["claim"]["attempt"]
        released = clients[0].post(
            f"/api/v1/projects/{pid}/attempts/{attempt['id']}/release",
            json={"generation": attempt["generation"], "handoff": "nothing done"},
            headers={"Idempotency-Key": f"r{n}"},
        )
        assert released.status_code == 200, released.text
    queued: list[httpx.Response] = []
    named: list[httpx.Response] = []
    lock = threading.Lock()

    def ask(index: int) -> None:
        if index % 2:
            tid = backing[index // 2]
            body: dict[str, object] = {"task_id": tid, "expected_task_revision": 1}
        else:
            body = {}
        resp = clients[index].post(claims, json=body, headers={"Idempotency-Key": f"q{index}"})
        with lock:
            (named if body else queued).append(resp)

    _at_once(len(clients), ask)
    for c in clients:
        c.close()
    assert [r.status_code for r in queued] == [201] * 12, [r.text for r in queued]
    got_ids = [r.json()["data"]["claim"]["task"]["id"] for r in queued]
    assert sorted(got_ids) == sorted(fresh)
    assert [r.status_code for r in named] == [409] * 12, [r.text for r in named]
    assert {r.json()["error"]["code"] for r in named} == {"claim_conflict"}
    assert all("backing off" in r.json()["error"]["message"] for r in named)


CREATES = 32


def test_the_weekly_budget_holds_under_concurrent_creates(live: LiveServer) -> None:
    """32 agent task creates at once in one project: the budget (5 a week) admits exactly 5,
    on SQLite's single writer and on PostgreSQL's concurrent transactions alike."""
    admin = live.admin_client()
    try:
        pid = admin.post(
            "/api/v1/projects",
            json={"name": "budget", "repository_url": "https://x/y", "admit_agent_tasks": True},
            headers={"Idempotency-Key": "p"},
        ).json()["data"]["id"]
        tokens = [
            admin.post(
                "/api/v1/admin/agents",
                json={"name": f"planner-{i}", "projects": [pid]},
                headers={"Idempotency-Key": f"a{i}"},
            ).json()["data"]["token"]
            for i in range(4)
        ]
    finally:
        admin.close()
    clients = [
        httpx.Client(base_url=live.url, timeout=60, headers={"Authorization": f"Bearer {t}"})
        for t in tokens
    ]
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def create(index: int) -> None:
        resp = clients[index % len(clients)].post(
            f"/api/v1/projects/{pid}/tasks",
            json={"title": f"t{index}", "acceptance_criteria": ["c"]},
            headers={"Idempotency-Key": f"t{index}"},
        )
        with lock:
            answers.append(resp)

    _at_once(CREATES, create)
    for c in clients:
        c.close()
    assert [r.status_code for r in answers] == [201] * CREATES, [r.text for r in answers]
    held = Counter(r.json()["data"]["admission"]["held"] for r in answers)
    assert held == {False: 5, True: CREATES - 5}
    admin = live.admin_client()
    try:
        items = admin.get(f"/api/v1/projects/{pid}/tasks?limit=200").json()["data"]["items"]
    finally:
        admin.close()
    assert Counter(t["lifecycle"] for t in items) == {"open": 5, "planned": CREATES - 5}
