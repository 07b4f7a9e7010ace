"""Database round trips and latency per lease operation: one agent, no HTTP, PostgreSQL.

One agent loops claim -> renew -> checkpoint -> release through the service's own mutation
transactions (as bench/lease_ops.py's "direct" mode) against a throwaway PostgreSQL; every
round trip to the server is counted (BEGIN, each query, savepoints, COMMIT; a pipeline of
deferred writes sent with a query or the COMMIT is one), so the figure does not depend on the
machine's load, and the latency of a lone agent is the best of three runs. The statements that
rode in a pipeline are listed too (not round trips of their own).

    uv run python bench/round_trips.py [--seconds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import psycopg  # noqa: E402
from sqlalchemy import Engine, event  # noqa: E402
from tests.kit import pg  # noqa: E402

import lease_ops  # noqa: E402
from agentc.store import sql  # noqa: E402

counts: Counter[str] = Counter()  # round trips
by_operation: Counter[str] = Counter()  # round trips of each kind of lease operation
operations: Counter[str] = Counter()
current = ["?"]  # the lease operation whose transaction runs (one agent: one at a time)
riding: Counter[str] = Counter()  # statements sent in a pipeline with a query or the COMMIT
IDLE = psycopg.pq.TransactionStatus.IDLE


def counted(open_engine: Any) -> Any:
    def open_counting(*args: Any, **kwargs: Any) -> Engine:
        engine: Engine = open_engine(*args, **kwargs)

        @event.listens_for(engine, "before_cursor_execute")
        def _statement(*_args: Any) -> None:
            counts["statements through SQLAlchemy"] += 1

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            # In autocommit mode the driver sends no BEGIN: ours rides with the first query.
            if not conn.connection.dbapi_connection.autocommit:
                counts["BEGIN alone"] += 1

        @event.listens_for(engine, "commit")
        def _commit(conn: Any) -> None:
            # A COMMIT already sent with the deferred writes left nothing to commit.
            if conn.connection.dbapi_connection.info.transaction_status != IDLE:
                counts["COMMIT alone"] += 1

        return engine

    return open_counting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    execute, pipeline = sql._execute, sql._pipeline

    def counting(conn: Any, statement: str, params: Any) -> Any:
        counts["queries on the driver's cursor"] += 1
        by_operation[current[0]] += 1
        return execute(conn, statement, params)

    mutation = lease_ops.mutation  # type: ignore[attr-defined]

    def naming(rt: Any, creds: Any, operation: str, *args: Any, **kwargs: Any) -> Any:
        work = mutation(rt, creds, operation, *args, **kwargs)
        name = operation.rsplit("/", 1)[-1]

        def named(tx: Any) -> Any:
            current[0] = name
            operations[name] += 1
            return work(tx)

        return named

    lease_ops.mutation = naming  # type: ignore[attr-defined]

    def counting_pipeline(
        dbapi: Any, statements: Any, cursor: Any, statement: str, params: Any
    ) -> None:
        riding[f"deferred writes sent with {statement.split()[0]}"] += len(statements)
        pipeline(dbapi, statements, cursor, statement, params)

    sql._execute = counting  # type: ignore[assignment]
    sql._pipeline = counting_pipeline  # type: ignore[assignment]
    lease_ops.open_engine = counted(lease_ops.open_engine)  # type: ignore[attr-defined]
    server = pg.start()
    try:
        database = server.create_database("rt")
        pid, creds = lease_ops.prepare(database, 1)
        best: tuple[float, int, dict[str, float], dict[str, float]] | None = None
        for _ in range(3):
            for counter in (counts, riding, by_operation, operations):
                counter.clear()
            ops, lat = asyncio.run(lease_ops.direct(database, pid, creds, args.seconds))
            p50 = lease_ops.percentile(lat, 0.5) * 1000
            per_op = {k: v / len(lat) for k, v in counts.items()}
            per_op |= {f"({k})": v / len(lat) for k, v in riding.items()}
            kinds = {k: by_operation[k] / n for k, n in operations.items()}
            if best is None or p50 < best[0]:
                best = (p50, ops, per_op, kinds)
    finally:
        pg.stop(server)
    assert best is not None
    p50, ops, per_op, kinds = best
    print(f"one agent, direct, PostgreSQL: p50 {p50:.2f} ms, {ops} ops/s")
    trips = sum(v for k, v in per_op.items() if not k.startswith("("))
    print(f"round trips per lease operation: {trips:.2f}")
    for name, value in sorted(per_op.items()):
        print(f"  {value:6.2f}  {name}")
    # BEGIN rides with a transaction's first query and the COMMIT with its deferred writes,
    # so every round trip of an operation is one of its queries.
    print(
        "queries (round trips) per operation:", ", ".join(f"{k} {v:.2f}" for k, v in kinds.items())
    )


if __name__ == "__main__":
    main()
