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

import asyncio
import concurrent.futures
import hashlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from agentc.core.errors import CoordinatorError
from agentc.store.clock import HighWater
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

    def __init__(self, conn: Connection, clock: Clock, now: int | None = None) -> None:
        self.conn = conn
        self._clock = clock
        self.now = clock() if now is None else now
        self.is_postgres = conn.dialect.name == "postgresql"

    def serialize(self, name: str) -> None:
        """Hold ``name`` until this transaction ends: a second transaction asking for the same
        name waits for the first to commit or roll back (PostgreSQL: a transaction-level
        advisory lock on the name's 64-bit hash; then time is re-read). SQLite's one writer
        already runs mutations one at a time."""
        if not self.is_postgres:
            return
        digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
        run(self.conn, "SELECT pg_advisory_xact_lock(:k)", k=int.from_bytes(digest, signed=True))
        self._locked()

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
            self._locked()
        return found

    def _locked(self) -> None:
        """After a lock was granted (it may have waited): the service time read again."""
        self.now = max(self.now, self._clock())


class Executor:
    """Runs read and write functions against the database."""

    def __init__(self, engine: Engine, clock: Clock = wall_clock_ms) -> None:
        self.engine = engine
        self.time = HighWater(clock)  # the one home of the service's time (agentc.store.clock)
        self.clock = self.time.read_now
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._writer: _SqliteWriter | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        if self.is_sqlite:
            self._writer = _SqliteWriter(engine, self.time)
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

    async def write_async(self, fn: Callable[[Tx], T]) -> T:
        """Run a mutation and await its durable commit: the service's way. On SQLite the
        writer answers the event loop once per batch (not once per mutation), and a mutation
        whose caller has gone away before the batch starts is not run."""
        if self._writer is None:
            return await asyncio.wrap_future(self.submit_write(fn))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._writer.put(_Awaited(loop, future), fn)
        return await future

    def write(self, fn: Callable[[Tx], T]) -> T:
        """Run a mutation and wait for its durable commit (for tools and tests)."""
        return self.submit_write(fn).result()

    def read(self, fn: Callable[[Tx], T]) -> T:
        """Run a read; a database that cannot be reached (restarting, its connection cut) is
        503 ``temporarily_unavailable``, as for writes, never a 500."""
        try:
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
        except DBAPIError as exc:
            if self.engine.dialect.name == "sqlite" and not exc.connection_invalidated:
                raise  # on SQLite an OperationalError is also a bad statement: a bug, 500
            raise _unavailable(exc) from exc

    def _pg_write(self, fn: Callable[[Tx], T]) -> T:
        for attempt in range(8):
            try:
                with self.engine.connect() as conn:
                    begin(conn)  # BEGIN goes with the first query
                    try:
                        with conn.begin():
                            result = fn(_write_tx(conn, self.time))
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


def _write_tx(conn: Connection, time: HighWater) -> Tx:
    """A write's transaction: its time from the high-water clock (refused while paused)."""
    return Tx(conn, time.read_now, time.write_now(conn))


def _unavailable(exc: DBAPIError) -> Exception:
    """A database error of the connection (the server restarting or gone, a lock timeout, a cut
    connection) as 503, retryable; any other stays what it is (a bug: 500)."""
    if isinstance(exc, OperationalError | InterfaceError) or exc.connection_invalidated:
        return CoordinatorError(
            "temporarily_unavailable",
            "the database is busy; retry with the same Idempotency-Key",
            status=503,
            retryable=True,
        )
    return exc


class _Awaited(NamedTuple):
    """A mutation's caller on an event loop: its future is answered on that loop."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


_Caller = concurrent.futures.Future[Any] | _Awaited
_Job = tuple[_Caller, Callable[[Tx], Any]]
_Outcome = tuple[_Caller, Any, BaseException | None]


def _starts(caller: _Caller) -> bool:
    """Whether the caller still waits (a cancelled one's mutation is not run)."""
    if isinstance(caller, _Awaited):
        return not caller.future.cancelled()  # read across threads: at worst, run for nobody
    return caller.set_running_or_notify_cancel()


def _answer(outcomes: list[_Outcome]) -> None:
    """Answer each caller; those on an event loop get one call of that loop for them all."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
    for outcome in outcomes:
        caller, result, error = outcome
        if isinstance(caller, _Awaited):
            by_loop.setdefault(caller.loop, []).append(outcome)
        elif error is not None:
            caller.set_exception(error)
        else:
            caller.set_result(result)
    for loop, answers in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, answers)
        except RuntimeError:  # the loop has closed: nobody waits
            pass


def _waiting(caller: _Caller) -> bool:
    """Whether the caller has no answer yet."""
    return not (caller.future if isinstance(caller, _Awaited) else caller).done()


def _settle(answers: list[_Outcome]) -> None:
    """On the callers' loop: each still waiting future gets its result or error."""
    for caller, result, error in answers:
        assert isinstance(caller, _Awaited)
        if caller.future.done():  # cancelled while the batch ran
            continue
        if error is not None:
            caller.future.set_exception(error)
        else:
            caller.future.set_result(result)


class _SqliteWriter(threading.Thread):
    def __init__(self, engine: Engine, time: HighWater) -> None:
        super().__init__(name="agentc-sqlite-writer", daemon=True)
        self._engine = engine
        self._time = time
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()

    def submit(self, fn: Callable[[Tx], T]) -> concurrent.futures.Future[T]:
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.put(fut, fn)
        return fut

    def put(self, caller: _Caller, fn: Callable[[Tx], Any]) -> None:
        self._queue.put((caller, fn))

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
        outcomes: list[_Outcome] = []
        try:
            with conn.begin():
                for caller, fn in batch:
                    if not _starts(caller):
                        continue
                    run(conn, "SAVEPOINT job")
                    try:
                        result = fn(_write_tx(conn, self._time))
                    except BaseException as exc:  # the mutation alone is undone
                        run(conn, "ROLLBACK TO job")
                        run(conn, "RELEASE job")
                        outcomes.append((caller, None, exc))
                    else:
                        run(conn, "RELEASE job")
                        outcomes.append((caller, result, None))
        except Exception as exc:  # the commit itself failed: nobody's work is durable
            log.exception("sqlite batch commit failed")
            err = CoordinatorError(
                "temporarily_unavailable",
                "the database could not commit; retry with the same Idempotency-Key",
                status=503,
                retryable=True,
            )
            err.__cause__ = exc
            _answer([(caller, None, err) for caller, _fn in batch if _waiting(caller)])
            return
        _answer(outcomes)
