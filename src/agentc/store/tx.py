"""Transactions: every mutation runs as one function over one `Tx`.

SQLite has one writer: a dedicated thread takes the write lock (BEGIN IMMEDIATE), runs a batch
of queued mutations each inside its own SAVEPOINT (a refused mutation rolls back alone), and
commits once for the batch (group commit: one fsync for many mutations). No caller is answered
before the commit that holds its work is durable.

PostgreSQL runs each mutation in its own transaction on a pool of threads; operations lock the
rows they change (SELECT ... FOR UPDATE) and the service time is re-read after each lock.
Serialization failures and deadlocks are retried. BEGIN goes to the server with the mutation's
first query, and its deferred writes (audit events, its receipt, lease updates:
`agentc.store.sql.defer`) with its next query or the COMMIT, each in one round trip.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from agentc.core.errors import CoordinatorError
from agentc.store.sql import RowT, Value, begin, by_key_sql, commit, end, fetch_one, run

T = TypeVar("T")
Clock = Callable[[], int]
log = logging.getLogger("agentc.store")

BATCH_MAX = 128


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Tx:
    """One transaction: the connection, the service time read under the lock, the dialect.

    The queries of `agentc.store` run on `conn` (plain SQL on the driver's cursor, see
    `agentc.store.sql`) inside the same transaction."""

    def __init__(self, conn: Connection, clock: Clock) -> None:
        self.conn = conn
        self._clock = clock
        self.now = clock()
        self.is_postgres = conn.dialect.name == "postgresql"

    def lock(self, row: type[RowT], key: str, *, skip_locked: bool = False) -> RowT | None:
        """Read one row of row's table by its key for update (see `lock_one`)."""
        return self.lock_one(by_key_sql(row), row, skip_locked=skip_locked, key=key)

    def lock_one(
        self,
        sql: str,
        make: Callable[..., T],
        *,
        of: str | None = None,
        skip_locked: bool = False,
        **params: Value,
    ) -> T | None:
        """The first row of sql, read for update: on PostgreSQL this takes a row lock (on the
        rows of the table aliased `of` only, when sql joins tables it only reads) and re-reads
        time. With skip_locked, a row another transaction holds reads as None instead of
        waiting."""
        if self.is_postgres:
            sql += " FOR UPDATE" + (f" OF {of}" if of else "")
            sql += " SKIP LOCKED" if skip_locked else ""
        found = fetch_one(self.conn, sql, make, **params)
        if self.is_postgres:
            self.now = max(self.now, self._clock())
        return found


class Executor:
    """Runs read and write functions against the database."""

    def __init__(self, engine: Engine, clock: Clock = wall_clock_ms) -> None:
        self.engine = engine
        self.clock = clock
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._writer: _SqliteWriter | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        if self.is_sqlite:
            self._writer = _SqliteWriter(engine, clock)
            self._writer.start()
        else:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=engine.pool.size() + 2,  # type: ignore[attr-defined]
                thread_name_prefix="agentc-pg",
            )

    def submit_write(self, fn: Callable[[Tx], T]) -> concurrent.futures.Future[T]:
        if self._writer is not None:
            return self._writer.submit(fn)
        assert self._pool is not None
        return self._pool.submit(self._pg_write, fn)

    def write(self, fn: Callable[[Tx], T]) -> T:
        """Run a mutation and wait for its durable commit (for tools and tests)."""
        return self.submit_write(fn).result()

    def read(self, fn: Callable[[Tx], T]) -> T:
        with (
            self.engine.connect().execution_options(sqlite_begin="DEFERRED") as conn,
            conn.begin(),
        ):
            try:
                result = fn(Tx(conn, self.clock))
                commit(conn)
                return result
            finally:
                end(conn)

    def _pg_write(self, fn: Callable[[Tx], T]) -> T:
        for attempt in range(8):
            try:
                with self.engine.connect() as conn:
                    begin(conn)  # BEGIN goes with the first query
                    try:
                        with conn.begin():
                            result = fn(Tx(conn, self.clock))
                            commit(conn)  # the deferred writes and COMMIT: one round trip
                            return result
                    finally:
                        end(conn)
            except DBAPIError as exc:
                sqlstate = getattr(exc.orig, "sqlstate", None)
                if sqlstate in ("40001", "40P01") and attempt < 7:
                    time.sleep(0.002 * (attempt + 1))
                    continue
                raise _unavailable(exc) from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.engine.dispose()


def _unavailable(exc: DBAPIError) -> Exception:
    if isinstance(exc, OperationalError):
        return CoordinatorError(
            "temporarily_unavailable",
            "the database is busy; retry with the same Idempotency-Key",
            status=503,
            retryable=True,
        )
    return exc


_Job = tuple[concurrent.futures.Future[Any], Callable[[Tx], Any]]


class _SqliteWriter(threading.Thread):
    def __init__(self, engine: Engine, clock: Clock) -> None:
        super().__init__(name="agentc-sqlite-writer", daemon=True)
        self._engine = engine
        self._clock = clock
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()

    def submit(self, fn: Callable[[Tx], T]) -> concurrent.futures.Future[T]:
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((fut, fn))
        return fut

    def stop(self) -> None:
        self._queue.put(None)
        self.join(timeout=10)

    def run(self) -> None:
        conn = self._engine.connect()
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first]
                stop = False
                while len(batch) < BATCH_MAX:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stop = True
                        break
                    batch.append(item)
                self._run_batch(conn, batch)
                if stop:
                    return
        finally:
            conn.close()

    def _run_batch(self, conn: Connection, batch: list[_Job]) -> None:
        outcomes: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        try:
            with conn.begin():
                for fut, fn in batch:
                    if not fut.set_running_or_notify_cancel():
                        continue
                    run(conn, "SAVEPOINT job")
                    try:
                        result = fn(Tx(conn, self._clock))
                    except BaseException as exc:  # the mutation alone is undone
                        run(conn, "ROLLBACK TO job")
                        run(conn, "RELEASE job")
                        outcomes.append((fut, None, exc))
                    else:
                        run(conn, "RELEASE job")
                        outcomes.append((fut, result, None))
        except Exception as exc:  # the commit itself failed: nobody's work is durable
            log.exception("sqlite batch commit failed")
            err = CoordinatorError(
                "temporarily_unavailable",
                "the database could not commit; retry with the same Idempotency-Key",
                status=503,
                retryable=True,
            )
            err.__cause__ = exc
            for fut, _fn in batch:
                if not fut.done():
                    fut.set_exception(err)
            return
        for fut, result, error in outcomes:
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)
