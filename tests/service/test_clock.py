"""The service's time never goes backwards (agentc.store.clock), tested by faking the clock on
both backends: a small step back stands still, a large one pauses writes with a clear error
and says why on /healthz until the clock catches up or the host confirms it (recover-clock,
the real server CLI), and a restarted service starts from the mark kept in the database."""

from __future__ import annotations

import subprocess

import pytest

from agentc.core.errors import CoordinatorError
from agentc.store.clock import TOLERANCE_MS
from agentc.store.engine import Database, open_engine
from agentc.store.tx import Executor
from tests.kit.live import SERVER
from tests.service.kit import ApiError, Clock, Service


def _project(svc: Service, name: str) -> dict[str, object]:
    data: dict[str, object] = svc.admin.post(
        "/api/v1/projects", {"name": name, "repository_url": "https://x/y"}
    )
    return data


def test_a_small_step_back_stands_still(svc: Service, clock: Clock) -> None:
    _project(svc, "before")
    mark = clock.now
    clock.now -= TOLERANCE_MS  # a step of time synchronisation
    made = _project(svc, "after")
    assert made["created_at"] >= svc.admin.get("/api/v1/projects")["items"][0]["created_at"]
    events = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql("SELECT max(created_at) FROM events").scalar_one()
    )
    assert events == mark  # the time the service used did not go back


def test_a_clock_far_behind_pauses_writes_until_it_catches_up(svc: Service, clock: Clock) -> None:
    _project(svc, "first")
    clock.now -= 60_000
    with pytest.raises(ApiError) as refused:
        _project(svc, "paused")
    assert refused.value.status == 503 and refused.value.code == "clock_reconciliation_required"
    assert "recover-clock" in refused.value.body["error"]["message"]
    health = svc.client.get("/healthz")
    assert health.status_code == 503 and "behind" in health.json()["reason"]
    assert svc.admin.get("/api/v1/projects")["items"]  # reads go on
    clock.advance(61)  # caught up
    _project(svc, "resumed")
    assert svc.client.get("/healthz").status_code == 200


def test_the_host_confirms_the_clock_and_writes_resume(
    svc: Service, clock: Clock, database: str
) -> None:
    _project(svc, "first")
    clock.now -= 3_600_000
    with pytest.raises(ApiError):
        _project(svc, "paused")
    done = subprocess.run(
        [SERVER, "--database", database, "recover-clock"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # The host's wall clock is now the mark; the fake clock is ahead of it again.
    assert clock.now > subprocess_wall_ms_bound()
    _project(svc, "resumed")


def subprocess_wall_ms_bound() -> int:
    import time

    return time.time_ns() // 1_000_000 + 60_000


def test_a_restarted_service_starts_from_the_kept_mark(database: str) -> None:
    ahead = Clock()
    first = Service(database, ahead)
    _project(first, "made")
    first.executor.close()
    behind = Clock(ahead.now - 600_000)
    executor = Executor(open_engine(Database.parse(database), create=False), behind)
    try:
        with pytest.raises(CoordinatorError) as refused:
            executor.write(lambda tx: tx.now)
        assert refused.value.code == "clock_reconciliation_required"
        assert executor.read(lambda tx: tx.now) >= ahead.now - 600_000
    finally:
        executor.close()
