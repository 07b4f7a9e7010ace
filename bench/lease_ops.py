"""Lease-operation throughput: N agents over real HTTP vs the same transactions without HTTP.

Each simulated agent loops claim (next ready task) -> renew -> checkpoint -> release against a
real `agent-coordinator-server serve` (uvicorn, in a subprocess), on SQLite (synchronous=FULL)
and on PostgreSQL (a throwaway server started here). Measured in the same run:

- direct: the very same mutation transactions (authentication, receipt, operation, audit
  event) submitted to the service's executor by the same number of agents, without HTTP;
- raw (PostgreSQL): the database's own ceiling, a minimal lease loop by the same number of
  clients on one connection each, one statement per operation in its own transaction: claim
  (UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1)), renew (a fenced UPDATE),
  checkpoint (an INSERT) and release (a fenced UPDATE back to ready);
- http with --workers 1, 2 and 4 on PostgreSQL (`--workers`), 1 on SQLite;
- with --http-variants, the same app under other uvicorn event loops and HTTP parsers, or
  under granian (serve_variant.py: e.g. asyncio+h11, granian+uvloop; the server's own choice is
  uvicorn's "auto": uvloop and httptools).

    uv run python bench/lease_ops.py [--agents 64] [--seconds 20] [--backend sqlite|postgres|both]
        [--workers 1,2,4] [--server-args "..."] [--http-variants asyncio+h11]

Prints ops/s, p50 and p99 latency for each, the CPU time per operation of the service, of
PostgreSQL and of the load generator (this process), and ratios against the ceilings. Not a test: it
asserts nothing; docs/benchmarks.md keeps the latest figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tests.kit import pg  # noqa: E402

from agentc.core.model import Access, CredentialClass, PrincipalKind, PrincipalRole  # noqa: E402
from agentc.service.api import mutation  # noqa: E402
from agentc.service.auth import Presented  # noqa: E402
from agentc.service.ops import Runtime  # noqa: E402
from agentc.service.schemas import CheckpointIn, ClaimIn, ReleaseIn, RenewIn  # noqa: E402
from agentc.service.serving import settle_heap  # noqa: E402
from agentc.service.settings import ServerSettings  # noqa: E402
from agentc.service.work import leases  # noqa: E402
from agentc.service.work.accounts import (  # noqa: E402
    create_admin,
    issue_agent_credential,
    open_session,
)
from agentc.service.work.projects import create_project  # noqa: E402
from agentc.service.work.tasks import create_task  # noqa: E402
from agentc.store.engine import Database, migrate, open_engine  # noqa: E402
from agentc.store.tx import Executor, Tx  # noqa: E402
from rawhttp import Connection  # noqa: E402

SERVER = str(Path(sys.executable).with_name("agent-coordinator-server"))
ORIGIN = "http://127.0.0.1"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def prepare(database: str, agents: int) -> tuple[str, list[Presented]]:
    """A project with 2N ready tasks and N agents with open sessions, written directly."""
    from agentc.service.auth import Actor
    from agentc.service.ops import Op
    from agentc.service.schemas import ProjectIn, SessionIn, TaskIn

    rt = runtime(database)
    ex = rt.executor
    try:
        admin_id = ex.write(lambda tx: create_admin(tx.conn, tx.now, "admin", "x" * 16))
        human = Actor(admin_id, "admin", PrincipalKind.HUMAN, PrincipalRole.ADMIN)

        def as_op(actor: Actor, fn: Any, body: Any) -> Any:
            return ex.write(lambda tx: fn(Op(tx, actor, rt), body).data)

        project = as_op(
            human,
            create_project,
            # Each cycle ends with a release and the next claims the task again: the project
            # turns the fruitless-attempt backoff off, so the tasks stay on offer.
            ProjectIn(
                name="bench", repository_url="https://example.invalid/r", park_after_attempts=0
            ),
        )["id"]
        for i in range(agents * 2):
            as_op(
                human,
                lambda op, b: create_task(op, project, b),
                TaskIn(title=f"t{i}", acceptance_criteria=["c"]),
            )
        creds = []
        for i in range(agents):

            def issue(tx: Tx, name: str = f"agent-{i}") -> dict[str, Any]:
                return issue_agent_credential(
                    tx.conn, tx.now, name, CredentialClass.SUPERVISED, Access.WRITE, None, [project]
                )

            cred = ex.write(issue)
            agent = Actor(
                cred["agent_id"],
                f"agent-{i}",
                PrincipalKind.AGENT,
                PrincipalRole.AGENT,
                cred["credential_id"],
                CredentialClass.SUPERVISED,
                Access.WRITE,
            )
            sess = as_op(agent, open_session, SessionIn(harness="bench"))
            creds.append(
                Presented(bearer=cred["token"], session_id=sess["session_id"], proof=sess["proof"])
            )
        return project, creds
    finally:
        ex.close()


def runtime(database: str) -> Runtime:
    settings = ServerSettings(database=database, allow_insecure_loopback=True)
    engine = open_engine(Database.parse(database))
    migrate(engine)
    return Runtime(settings, Executor(engine))


CYCLE = ("claim", "renew", "checkpoint", "release")


async def direct(
    database: str, pid: str, creds_list: list[Presented], seconds: float
) -> tuple[int, list[float]]:
    """The ceiling: the same mutation transactions (authentication, receipt, operation, audit
    event) submitted to the same executor by N concurrent agents on one event loop, as the
    server does, but without HTTP."""
    rt = runtime(database)
    settle_heap()  # as the server does before serving
    stop = time.monotonic() + seconds
    lat: list[float] = []
    count = 0

    async def write(creds: Presented, path: str, model: Any, fn: Any) -> Any:
        nonlocal count
        t0 = time.perf_counter()
        _status, body, _ = await rt.executor.write_async(
            mutation(
                rt,
                creds,
                f"POST /api/v1/projects/{pid}{path}",
                uuid.uuid4().hex,
                model,
                fn,
                project_id=pid,
            )
        )
        lat.append(time.perf_counter() - t0)
        count += 1
        return json.loads(body)["data"]

    async def agent(creds: Presented) -> None:
        while time.monotonic() < stop:
            claim = (
                await write(creds, "/claims", ClaimIn(), lambda op, b: leases.claim(op, pid, b))
            )["claim"]
            if claim is None:
                await asyncio.sleep(0.01)
                continue
            aid, gen = claim["attempt"]["id"], claim["attempt"]["generation"]
            base = f"/attempts/{aid}"
            await write(
                creds,
                base + "/renew",
                RenewIn(generation=gen),
                lambda op, b, aid=aid: leases.renew(op, pid, aid, b),
            )
            await write(
                creds,
                base + "/checkpoints",
                CheckpointIn(generation=gen, summary="s"),
                lambda op, b, aid=aid: leases.checkpoint(op, pid, aid, b),
            )
            await write(
                creds,
                base + "/release",
                ReleaseIn(generation=gen, handoff="h"),
                lambda op, b, aid=aid: leases.release(op, pid, aid, b),
            )

    t0 = time.monotonic()
    await asyncio.gather(*(agent(c) for c in creds_list))
    elapsed = time.monotonic() - t0
    rt.executor.close()
    return int(count / elapsed), lat


async def over_http(
    url: str,
    pid: str,
    creds_list: list[Presented],
    seconds: float,
    ends: list[float] | None = None,
) -> tuple[int, list[float]]:
    """N agents, one keep-alive connection each, doing the lease cycle over real HTTP (with
    ends, each operation's end time too, time.perf_counter's, in the order of the latencies)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    lat: list[float] = []
    count = 0
    stop = time.monotonic() + seconds

    async def agent(creds: Presented) -> None:
        nonlocal count
        conn = Connection(host, int(port))
        headers = {
            "Authorization": f"Bearer {creds.bearer}",
            "X-Coordinator-Session": creds.session_id or "",
            "X-Coordinator-Session-Proof": creds.proof or "",
        }

        async def call(path: str, body: dict[str, Any]) -> Any:
            nonlocal count
            t0 = time.perf_counter()
            status, raw = await conn.request(
                "POST", path, {**headers, "Idempotency-Key": uuid.uuid4().hex}, body
            )
            lat.append(time.perf_counter() - t0)
            if ends is not None:
                ends.append(time.perf_counter())
            count += 1
            if status >= 400:
                raise RuntimeError(raw.decode())
            return json.loads(raw)["data"]

        base = f"/api/v1/projects/{pid}"
        try:
            while time.monotonic() < stop:
                claim = (await call(base + "/claims", {}))["claim"]
                if claim is None:
                    await asyncio.sleep(0.01)
                    continue
                aid, gen = claim["attempt"]["id"], claim["attempt"]["generation"]
                await call(f"{base}/attempts/{aid}/renew", {"generation": gen})
                await call(
                    f"{base}/attempts/{aid}/checkpoints", {"generation": gen, "summary": "s"}
                )
                await call(f"{base}/attempts/{aid}/release", {"generation": gen, "handoff": "h"})
        finally:
            await conn.close()

    t0 = time.monotonic()
    await asyncio.gather(*(agent(c) for c in creds_list))
    elapsed = time.monotonic() - t0
    return int(count / elapsed), lat


RAW_SCHEMA = """
CREATE TABLE raw_tasks (
    id bigint PRIMARY KEY,
    state text NOT NULL,
    generation bigint NOT NULL,
    expires_at bigint
);
CREATE TABLE raw_checkpoints (
    id bigserial PRIMARY KEY,
    task_id bigint NOT NULL,
    generation bigint NOT NULL,
    summary text NOT NULL
);
"""
RAW_CLAIM = (
    "UPDATE raw_tasks SET state = 'claimed', generation = generation + 1, expires_at = %s "
    "WHERE id = (SELECT id FROM raw_tasks WHERE state = 'ready' ORDER BY id "
    "FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, generation"
)
RAW_RENEW = (
    "UPDATE raw_tasks SET expires_at = %s WHERE id = %s AND generation = %s AND state = 'claimed'"
)
RAW_CHECKPOINT = "INSERT INTO raw_checkpoints (task_id, generation, summary) VALUES (%s, %s, 's')"
RAW_RELEASE = (
    "UPDATE raw_tasks SET state = 'ready', expires_at = NULL WHERE id = %s AND generation = %s "
    "AND state = 'claimed'"
)


async def raw_postgres(url: str, agents: int, seconds: float) -> tuple[int, list[float]]:
    """PostgreSQL's own ceiling for the lease loop: the same number of clients, one
    connection each (autocommit: each statement is its own durable transaction), 2N tasks."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute(RAW_SCHEMA)
        setup.execute(
            "INSERT INTO raw_tasks SELECT i, 'ready', 0, NULL FROM generate_series(1, %s) i",
            (agents * 2,),
        )
    lat: list[float] = []
    count = 0
    stop = time.monotonic() + seconds

    async def client() -> None:
        nonlocal count
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)

        async def op(sql: str, *args: Any) -> Any:
            nonlocal count
            t0 = time.perf_counter()
            cur = await conn.execute(sql, args)
            row = await cur.fetchone() if cur.description else None
            lat.append(time.perf_counter() - t0)
            count += 1
            return row

        try:
            while time.monotonic() < stop:
                now = int(time.time() * 1000)
                claimed = await op(RAW_CLAIM, now + 600_000)
                if claimed is None:
                    await asyncio.sleep(0.01)
                    continue
                task, gen = claimed
                await op(RAW_RENEW, now + 600_000, task, gen)
                await op(RAW_CHECKPOINT, task, gen)
                await op(RAW_RELEASE, task, gen)
        finally:
            await conn.close()

    t0 = time.monotonic()
    await asyncio.gather(*(client() for _ in range(agents)))
    elapsed = time.monotonic() - t0
    return int(count / elapsed), lat


def serve(
    database: str, *extra: str, variant: tuple[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """The server on a free port: `agent-coordinator-server serve` (uvicorn's defaults, uvloop
    and httptools), or with variant (loop, http) the same app through serve_variant.py."""
    port = pg.free_port()
    url = f"http://127.0.0.1:{port}"
    if variant is not None:
        command = [sys.executable, str(ROOT / "bench" / "serve_variant.py"), database, str(port)]
        command += list(variant)
    else:
        command = [
            SERVER,
            "--database",
            database,
            "--public-origin",
            url,
            "--allow-insecure-loopback",
            "--listen",
            f"127.0.0.1:{port}",
            *extra,
            "serve",
        ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def measure(
    mode: str,
    ops: int,
    lat: list[float],
    cpu_s: float | None = None,
    db_s: float | None = None,
    gen_s: float | None = None,
) -> dict[str, Any]:
    def per_op(seconds: float | None) -> float | None:
        return None if seconds is None or not lat else seconds * 1000 / len(lat)

    return {
        "mode": mode,
        "ops": ops,
        "p50_ms": percentile(lat, 0.5) * 1000,
        "p99_ms": percentile(lat, 0.99) * 1000,
        # The service's CPU time per operation (all its processes), whatever the load.
        "cpu_ms": per_op(cpu_s),
        # PostgreSQL's CPU time per operation (the postmaster and every backend).
        "db_ms": per_op(db_s),
        # The load generator's own CPU time per operation (this process: the agents' side).
        "gen_ms": per_op(gen_s),
    }


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of the process and its live children (the workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for p in [str(pid), *kids]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a worker that has just exited
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def db_cpu_seconds(server: pg.PgServer | None) -> float | None:
    """CPU time of a PostgreSQL server: the postmaster, its live backends, and (through the
    postmaster's children times) every backend that has exited."""
    if server is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    pid = (server.root / "data" / "postmaster.pid").read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / tick  # utime, stime, cutime, cstime
    for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            kf = Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it has just exited (its time is now the postmaster's)
            continue
        total += (int(kf[11]) + int(kf[12])) / tick
    return total


def since(before: float | None, server: pg.PgServer | None) -> float | None:
    after = db_cpu_seconds(server)
    return None if before is None or after is None else after - before


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_backend(
    name: str,
    database: str,
    agents: int,
    seconds: float,
    workers: list[int],
    server_args: list[str],
    raw_url: str | None,
    variants: list[tuple[str, str]],
    server: pg.PgServer | None,
) -> list[dict[str, Any]]:
    pid, creds = prepare(database, agents)
    rows = []
    if raw_url is not None:
        gen0, db0 = own_cpu_seconds(), db_cpu_seconds(server)
        ops, lat = asyncio.run(raw_postgres(raw_url, agents, seconds))
        gen = own_cpu_seconds() - gen0
        rows.append(measure("raw", ops, lat, None, since(db0, server), gen))
    cpu0, db0 = own_cpu_seconds(), db_cpu_seconds(server)
    ops, lat = asyncio.run(direct(database, pid, creds, seconds))
    rows.append(measure("direct", ops, lat, own_cpu_seconds() - cpu0, since(db0, server)))
    # Every cycle ends with a release, so the tasks are ready again for the next run.
    servers: list[tuple[str, tuple[str, ...], tuple[str, str] | None]] = [
        (f"http w={n}", ("--workers", str(n), *server_args), None) for n in workers
    ]
    servers += [(f"{loop}+{http}", (), (loop, http)) for loop, http in variants]
    for mode, extra, variant in servers:
        proc, url = serve(database, *extra, variant=variant)
        try:
            time.sleep(1)  # every worker is up
            cpu0, db0, gen0 = cpu_seconds(proc.pid), db_cpu_seconds(server), own_cpu_seconds()
            ops, lat = asyncio.run(over_http(url, pid, creds, seconds))
            cpu, db = cpu_seconds(proc.pid) - cpu0, since(db0, server)
            gen = own_cpu_seconds() - gen0
        finally:
            proc.terminate()
            proc.wait()
        rows.append(measure(mode, ops, lat, cpu, db, gen))
    return rows


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument(
        "--workers",
        default="1,2,4",
        help="comma-separated --workers values to measure over HTTP on PostgreSQL",
    )
    ap.add_argument(
        "--server-args", default="", help="extra global options for the server, space-separated"
    )
    ap.add_argument(
        "--http-variants",
        default="",
        help="comma-separated LOOP+HTTP uvicorn variants (or granian+LOOP) to measure too (one "
        "process), e.g. asyncio+h11,granian+uvloop (the server's own is uvloop+httptools)",
    )
    args = ap.parse_args()
    variants = [
        (v.split("+")[0], v.split("+")[1]) for v in args.http_variants.split(",") if v.strip()
    ]
    sweep = [int(n) for n in args.workers.split(",")]
    results: dict[str, list[dict[str, Any]]] = {}
    tmp = tempfile.TemporaryDirectory(prefix="agentc-bench-")
    server = None
    load_before = load_average()
    try:
        backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
        for name in backends:
            if name == "sqlite":
                database = str(Path(tmp.name) / "bench.sqlite3")
                workers, raw_url = [1], None
            else:
                server = pg.start()
                database = server.create_database("bench")
                workers, raw_url = sweep, server.create_database("raw")
            results[name] = run_backend(
                name,
                database,
                args.agents,
                args.seconds,
                workers,
                args.server_args.split(),
                raw_url,
                variants,
                server,
            )
    finally:
        if server is not None:
            pg.stop(server)
        tmp.cleanup()
    print(
        f"lease operations: {args.agents} agents, {args.seconds:.0f} s per measurement, "
        f"{os.cpu_count()} cores, load average {load_before} before, {load_average()} after"
    )
    print(
        f"{'backend':10} {'mode':15} {'ops/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'cpu ms/op':>10} {'db ms/op':>9} {'gen ms/op':>10} {'ratio':>14}"
    )
    for name, rows in results.items():
        ceiling = next(r for r in rows if r["mode"] == ("raw" if name == "postgres" else "direct"))
        for r in rows:
            ratio = ""
            if r is not ceiling:
                ratio = f"{r['ops'] / max(1, ceiling['ops']):.2f} of {ceiling['mode']}"
            cpu, db, gen = (
                "" if r[k] is None else f"{r[k]:.2f}" for k in ("cpu_ms", "db_ms", "gen_ms")
            )
            print(
                f"{name:10} {r['mode']:15} {r['ops']:>8} {r['p50_ms']:>8.1f} "
                f"{r['p99_ms']:>8.1f} {cpu:>10} {db:>9} {gen:>10} {ratio:>14}"
            )


if __name__ == "__main__":
    main()
