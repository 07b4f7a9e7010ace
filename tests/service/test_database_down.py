"""While its PostgreSQL is down (restarting, every connection cut), the service answers reads
and writes with 503 ``temporarily_unavailable``, retryable, never a 500; once it is back, the
same requests succeed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import pg
from tests.kit.live import live_server

pytestmark = pytest.mark.postgres


@pytest.fixture
def own_pg() -> Iterator[pg.PgServer]:
    server = pg.start()
    try:
        yield server
    finally:
        pg.stop(server)


def test_a_database_that_is_down_is_503_for_reads_and_writes(
    own_pg: pg.PgServer, tmp_path: Path
) -> None:
    database = own_pg.create_database("down")
    with live_server(database, tmp_path) as live:
        admin = live.admin_client()
        assert admin.get("/api/v1/projects").status_code == 200
        pg.halt(own_pg)
        try:
            for _ in range(2):  # the pool's connections were cut; then no server at all
                read = admin.get("/api/v1/projects")
                assert read.status_code == 503, read.text
                assert read.json()["error"]["code"] == "temporarily_unavailable"
                assert read.json()["error"]["retryable"] is True
                body = {"name": "while-down", "repository_url": "https://x/y"}
                key = {"Idempotency-Key": str(uuid.uuid4())}
                wrote = admin.post("/api/v1/projects", json=body, headers=key)
                assert wrote.status_code == 503, wrote.text
                assert wrote.json()["error"]["code"] == "temporarily_unavailable"
        finally:
            pg.resume(own_pg)
        assert admin.get("/api/v1/projects").status_code == 200
        made = admin.post(
            "/api/v1/projects",
            json={"name": "after", "repository_url": "https://x/y"},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert made.status_code == 201, made.text
        admin.close()
