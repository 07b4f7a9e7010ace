"""The executor's awaited writes: every caller gets its own answer, a refused mutation is
undone alone, and a caller that went away before its batch started has nothing run."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agentc.core.errors import CoordinatorError
from agentc.store.accounts import Principal
from agentc.store.engine import Database, migrate, open_engine
from agentc.store.sql import fetch_row, insert
from agentc.store.tx import Executor, Tx


def _principal(n: int) -> Principal:
    return Principal(f"p{n}", f"name{n}", "human", "operator", None, None, 1, f"name{n}")


def _executor(database: str):
    engine = open_engine(Database.parse(database))
    migrate(engine)
    executor = Executor(engine)
    yield executor
    executor.close()
    engine.dispose()


@pytest.fixture
def executor(database: str):
    yield from _executor(database)


@pytest.fixture
def sqlite_executor(sqlite_database: str):
    """SQLite's: its one writer thread can be held, so callers queue behind it."""
    yield from _executor(sqlite_database)


def _add(n: int, refuse: bool = False):
    def work(tx: Tx) -> str:
        insert(tx.conn, _principal(n))
        if refuse:
            raise CoordinatorError("conflict", f"refused {n}", status=409)
        return f"added {n}"

    return work


def _exists(executor: Executor, n: int) -> bool:
    return executor.read(lambda tx: fetch_row(tx.conn, Principal, f"p{n}")) is not None


def test_concurrent_awaited_writes_each_get_their_own_answer(executor: Executor) -> None:
    async def main() -> list[object]:
        jobs = [executor.write_async(_add(n, refuse=n % 5 == 0)) for n in range(1, 41)]
        answers: list[object] = await asyncio.gather(*jobs, return_exceptions=True)
        return answers

    answers = asyncio.run(main())
    for n, answer in enumerate(answers, start=1):
        if n % 5 == 0:
            assert isinstance(answer, CoordinatorError) and answer.message == f"refused {n}"
            assert not _exists(executor, n)  # undone alone
        else:
            assert answer == f"added {n}"
            assert _exists(executor, n)


def test_callers_on_several_event_loops_share_a_batch(sqlite_executor: Executor) -> None:
    gate = threading.Event()
    blocker = sqlite_executor.submit_write(lambda _tx: gate.wait(10))  # holds the writer
    answers: dict[int, object] = {}

    def caller(n: int) -> None:
        answers[n] = asyncio.run(sqlite_executor.write_async(_add(n)))

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(1, 5)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert blocker.result(10) is True
    assert answers == {n: f"added {n}" for n in range(1, 5)}


def test_a_caller_gone_before_its_batch_has_nothing_run(sqlite_executor: Executor) -> None:
    gate = threading.Event()
    blocker = sqlite_executor.submit_write(lambda _tx: gate.wait(10))

    async def main() -> None:
        task = asyncio.ensure_future(sqlite_executor.write_async(_add(1)))
        kept = asyncio.ensure_future(sqlite_executor.write_async(_add(2)))
        await asyncio.sleep(0)  # both are queued behind the blocker
        task.cancel()
        gate.set()
        assert await kept == "added 2"
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    blocker.result(10)
    assert not _exists(sqlite_executor, 1)
    assert _exists(sqlite_executor, 2)


def test_one_name_serializes_its_transactions(executor: Executor) -> None:
    """The second of two transactions asking for one name runs only once the first has
    committed (and sees its write); another name does not wait for either."""
    first_holds, release = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def first(tx: Tx) -> None:
        tx.serialize("receipt POST /x k")
        insert(tx.conn, _principal(1))
        first_holds.set()
        assert release.wait(30)

    def second(tx: Tx) -> None:
        tx.serialize("receipt POST /x k")
        seen["first's row"] = fetch_row(tx.conn, Principal, "p1") is not None

    def other(tx: Tx) -> None:
        tx.serialize("receipt POST /x another")
        seen["other ran while the first held its name"] = not release.is_set()

    if executor.is_sqlite:
        # One writer: the transactions run one after the other whatever their names.
        release.set()
    one = executor.submit_write(first)
    assert first_holds.wait(30)
    if not executor.is_sqlite:
        executor.write(other)
    two = executor.submit_write(second)
    if not executor.is_sqlite:
        # The second waits on the first's name (PostgreSQL shows its lock as not granted).
        waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        deadline = time.monotonic() + 30
        while executor.read(lambda tx: tx.conn.exec_driver_sql(waiting).scalar()) != 1:
            assert time.monotonic() < deadline, "the second transaction never waited"
            time.sleep(0.01)
        assert not two.done() and "first's row" not in seen
        release.set()
    one.result(30)
    two.result(30)
    assert seen["first's row"] is True
    if not executor.is_sqlite:
        assert seen["other ran while the first held its name"] is True
