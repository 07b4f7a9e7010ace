"""Maintenance compaction while the lease benchmark runs: does it stall lease operations?

A database prepared as bench/lease_ops.py prepares it (a project, 2N ready tasks, N agents with
sessions) gets old payloads written directly: --receipts idempotency receipts with stored
answers of about --answer-bytes made 40 days ago, and --canaries canary rows received 40 days
ago. The server runs (`agent-coordinator-server serve`, a subprocess); the N agents loop
claim -> renew -> checkpoint -> release over HTTP for --seconds without maintenance (the
baseline), then again while `agent-coordinator-server maintenance --json` runs (started with
the second measurement). Prints the rows and bytes compaction removed, its batches and the
longest batch's time holding the writer, and the lease operations' p50, p99 and max latency
in the baseline and while maintenance ran.

    uv run python bench/compaction.py [--backend sqlite|postgres] [--agents 64] [--seconds 10]
        [--receipts 50000] [--canaries 2000] [--answer-bytes 600]

Not a test: it asserts nothing; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tests.kit import pg  # noqa: E402

from agentc.store.engine import Database, open_engine  # noqa: E402
from agentc.store.sql import run  # noqa: E402
from lease_ops import SERVER, load_average, over_http, percentile, prepare, serve  # noqa: E402

DAY_MS = 24 * 3600 * 1000


def seed(database: str, receipts: int, canaries: int, answer_bytes: int) -> None:
    """Old payloads, written directly (one transaction per 1,000 rows)."""
    engine = open_engine(Database.parse(database), create=False)
    old = int(time.time() * 1000) - 40 * DAY_MS
    answer = json.dumps({"data": {"note": "x" * max(0, answer_bytes - 20)}})
    with engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT id FROM projects").scalar_one()
        principal = conn.exec_driver_sql("SELECT id FROM principals LIMIT 1").scalar_one()
        conn.rollback()
        for start in range(0, receipts, 1000):
            with conn.begin():
                for n in range(start, min(receipts, start + 1000)):
                    run(
                        conn,
                        "INSERT INTO receipts (principal_id, operation, key, fingerprint, "
                        "status, body, created_at) VALUES (:p, 'POST /bench', :k, 'f', 200, "
                        ":b, :t)",
                        p=principal,
                        k=uuid.uuid4().hex,
                        b=answer,
                        t=old + n,
                    )
        with conn.begin():
            for n in range(canaries):
                row = {"harness": "claude", "outcome": "pass", "duration_ms": 1000 + n}
                run(
                    conn,
                    "INSERT INTO telemetry_rows (project_id, stream, host, identity, row_json, "
                    "received_at, principal_id) VALUES (:pid, 'canary', 'h', :i, :j, :t, :p)",
                    pid=pid,
                    i=uuid.uuid4().hex,
                    j=json.dumps(row),
                    t=old + n,
                    p=principal,
                )
    engine.dispose()


def latencies(lat: list[float]) -> str:
    ms = [x * 1000 for x in lat]
    return (
        f"{len(ms)} ops, p50 {percentile(ms, 0.5):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms, "
        f"max {max(ms, default=float('nan')):.1f} ms"
    )


def measure(database: str, args: argparse.Namespace) -> dict[str, Any]:
    pid, creds = prepare(database, args.agents)
    t0 = time.perf_counter()
    seed(database, args.receipts, args.canaries, args.answer_bytes)
    seeded = time.perf_counter() - t0
    proc, url = serve(database)
    try:
        time.sleep(1)
        _, baseline = asyncio.run(over_http(url, pid, creds, args.seconds))
        ends: list[float] = []
        started = time.perf_counter()
        maintenance = subprocess.Popen(
            [SERVER, "--database", database, "maintenance", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, during = asyncio.run(over_http(url, pid, creds, args.seconds, ends))
        out, err = maintenance.communicate(timeout=600)
        finished = time.perf_counter()
        if maintenance.returncode != 0:
            raise RuntimeError(err)
    finally:
        proc.terminate()
        proc.wait()
    # Only the operations that ended while maintenance ran (it may outlast the measurement).
    while_running = [lat for lat, end in zip(during, ends, strict=True) if end <= finished]
    return {
        "seeded_s": seeded,
        "maintenance_s": finished - started,
        "compacted": json.loads(out),
        "baseline": latencies(baseline),
        "during": latencies(while_running),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--receipts", type=int, default=50_000)
    ap.add_argument("--canaries", type=int, default=2_000)
    ap.add_argument("--answer-bytes", type=int, default=600)
    args = ap.parse_args()
    load_before = load_average()
    server = None
    with tempfile.TemporaryDirectory(prefix="agentc-bench-") as tmp:
        try:
            if args.backend == "sqlite":
                database = str(Path(tmp) / "bench.sqlite3")
            else:
                server = pg.start()
                database = server.create_database("bench")
            found = measure(database, args)
        finally:
            if server is not None:
                pg.stop(server)
    print(
        f"compaction under lease load: {args.backend}, {args.agents} agents, "
        f"{args.seconds:.0f} s per measurement, load average {load_before} before, "
        f"{load_average()} after; {args.receipts} old receipts, {args.canaries} old canary rows "
        f"(seeded in {found['seeded_s']:.1f} s)"
    )
    for name, c in found["compacted"].items():
        print(
            f"  {name}: {c['rows']} rows, {c['bytes']} bytes, {c['batches']} batches, longest "
            f"writer hold {c['longest_hold_ms']} ms"
        )
    print(f"  maintenance took {found['maintenance_s']:.1f} s")
    print(f"  lease operations, baseline:           {found['baseline']}")
    print(f"  lease operations, during maintenance: {found['during']}")


if __name__ == "__main__":
    main()
