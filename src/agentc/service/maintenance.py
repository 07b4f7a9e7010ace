"""`agent-coordinator-server maintenance`: the daily compaction of bounded payloads.

Idempotency receipts' stored answers past the receipt retention and canary results' payloads
past the reports' window are compacted (`agentc.store.compaction`: the rows stay, their
payloads go); permanent history stays. The work runs while the service serves, in batches of
a few hundred rows, each its own short write transaction on the service's clock (the
executor), with a pause after each so a waiting writer of the service goes first: a lease
operation waits at most one batch. The result (rows, bytes, batches, and the longest batch's
time holding the writer: from its transaction's start, the write lock taken, to its commit's
end; not the wait for the lock) is printed and recorded as a ``maintenance_compacted`` event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from sqlalchemy.engine import Connection

from agentc.core.model import RECEIPT_RETENTION_MS
from agentc.service.work.spend import DAY_MS, window_start
from agentc.store import compaction
from agentc.store.audit import write_event
from agentc.store.tx import Executor, Tx

BATCH_ROWS = 200
PAUSE_S = 0.05  # after each batch (at least; four times the batch's time when that is longer)

Compact = Callable[[Connection, int, int], tuple[int, int]]


@dataclass
class Compacted:
    rows: int = 0
    bytes: int = 0
    batches: int = 0
    longest_hold_ms: float = 0.0


def _receipts_before(now: int) -> int:
    return now - RECEIPT_RETENTION_MS


def _canaries_before(now: int) -> int:
    return window_start(now) - DAY_MS  # a day older than anything the reports read


PAYLOADS: dict[str, tuple[Compact, Callable[[int], int]]] = {
    "receipt_answers": (compaction.compact_receipts, _receipts_before),
    "canary_payloads": (compaction.compact_canaries, _canaries_before),
}


def compact(
    executor: Executor, batch_rows: int = BATCH_ROWS, pause_s: float = PAUSE_S
) -> dict[str, Compacted]:
    """Compact every bounded payload in batches; what each removed."""
    done = {name: _compact_one(executor, fn, before, batch_rows, pause_s)
            for name, (fn, before) in PAYLOADS.items()}  # fmt: skip
    data: dict[str, object] = {name: asdict(c) for name, c in done.items()}
    executor.write(
        lambda tx: write_event(
            tx.conn, tx.now, None, None, "maintenance_compacted", None, None, data
        )
    )
    return done


def _compact_one(
    executor: Executor,
    fn: Compact,
    before: Callable[[int], int],
    batch_rows: int,
    pause_s: float,
) -> Compacted:
    total = Compacted()
    entered = [0.0]

    def batch(tx: Tx) -> tuple[int, int]:
        entered[0] = time.monotonic()  # the writer is ours (SQLite: BEGIN IMMEDIATE ran)
        return fn(tx.conn, before(tx.now), batch_rows)

    while True:
        rows, size = executor.write(batch)
        held = time.monotonic() - entered[0]  # until the commit returned
        total.batches += 1
        total.rows += rows
        total.bytes += size
        total.longest_hold_ms = max(total.longest_hold_ms, round(held * 1000, 1))
        if rows < batch_rows:
            return total
        time.sleep(max(pause_s, 4 * held))
