"""Compaction of bounded payloads: the queries of the daily `maintenance` command.

Two payloads are kept only for a while; their rows stay, because a row still does a job:

- an idempotency receipt's stored answer (``receipts.body``), past the receipt retention: the
  row keeps refusing its key (``idempotency_receipt_expired``) so a late retry never acts
  twice, its answer is set to null;
- a canary result's payload (a ``telemetry_rows`` row of the canary stream), past the window
  the reports read: the row keeps its identity (a host that resends it is still told it came)
  and its time (when the host was last seen), its JSON becomes ``{}``.

Permanent history (tasks, attempts, reviews, events, cost rows) is never touched. Each call
compacts at most ``limit`` rows in the caller's transaction, oldest first, so a caller holds
the writer briefly per batch; it returns the rows and the payload bytes it removed.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from agentc.core.model import TelemetryStream
from agentc.store.sql import fetch_one, run

COMPACTED_ROW = "{}"

# The next batch, oldest first (the partial index ix_receipts_uncompacted keeps this a range
# scan however many compacted rows there are), its key as a row value.
_RECEIPTS = (
    "(principal_id, operation, key) IN (SELECT principal_id, operation, key FROM receipts "
    "WHERE body IS NOT NULL AND created_at < :before "
    "ORDER BY created_at, principal_id, operation, key LIMIT :limit)"
)
_CANARIES = (
    "(project_id, stream, host, identity) IN (SELECT project_id, stream, host, identity "
    "FROM telemetry_rows WHERE stream = :stream AND received_at < :before "
    f"AND row_json <> '{COMPACTED_ROW}' "
    "ORDER BY received_at, project_id, host, identity LIMIT :limit)"
)


def _bytes(conn: Connection, column: str) -> str:
    return (
        f"octet_length({column})"
        if conn.dialect.name == "postgresql"
        else (f"length(CAST({column} AS BLOB))")
    )


def compact_receipts(conn: Connection, before: int, limit: int) -> tuple[int, int]:
    """Null the stored answers of up to ``limit`` receipts made before ``before``."""
    found = fetch_one(
        conn,
        f"SELECT count(*), COALESCE(sum({_bytes(conn, 'body')}), 0) FROM receipts "
        f"WHERE {_RECEIPTS}",
        lambda n, size: (int(n), int(size)),
        before=before,
        limit=limit,
    )
    assert found is not None
    if found[0]:
        run(conn, f"UPDATE receipts SET body = NULL WHERE {_RECEIPTS}", before=before, limit=limit)
    return found


def compact_canaries(conn: Connection, before: int, limit: int) -> tuple[int, int]:
    """Empty the payloads of up to ``limit`` canary rows received before ``before``."""
    params: dict[str, str | int] = {
        "before": before,
        "limit": limit,
        "stream": TelemetryStream.CANARY.value,
    }
    found = fetch_one(
        conn,
        f"SELECT count(*), COALESCE(sum({_bytes(conn, 'row_json')} - {len(COMPACTED_ROW)}), 0) "
        f"FROM telemetry_rows WHERE {_CANARIES}",
        lambda n, size: (int(n), int(size)),
        **params,
    )
    assert found is not None
    if found[0]:
        run(
            conn,
            f"UPDATE telemetry_rows SET row_json = '{COMPACTED_ROW}' WHERE {_CANARIES}",
            **params,
        )
    return found
