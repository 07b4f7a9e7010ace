"""The sign-in throttle holds across service processes (`serve --workers N`): its failures are
rows in the database, not counts in a process's memory.

Two service processes on one PostgreSQL take the failed sign-ins of one address in turn; the
address's limit (30 a minute) is reached by their sum, and then both refuse it. Two `serve`
processes on their own ports stand for two workers: a test cannot choose which worker of one
socket takes a connection, and what is shared (the database) is the same. (The per-name
back-off is kept in the same rows, `tests/service/test_auth.py` checks its rule on both
databases without a clock of its own; over real servers it would depend on elapsed time.)
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server
from tests.kit.pg import PgServer

pytestmark = pytest.mark.postgres


def sign_in(server: LiveServer, username: str, password: str) -> int:
    resp = httpx.post(
        server.url + "/api/v1/auth/login",
        json={"username": username, "password": password},
        headers={"Origin": server.url},
        timeout=30,
    )
    return resp.status_code


def test_two_processes_count_one_addresss_failures_together(
    pg_server: PgServer, tmp_path: Path
) -> None:
    database = pg_server.create_database(f"signin_{time.monotonic_ns()}")
    with live_server(database, tmp_path) as one, live_server(database, tmp_path) as two:
        # Made-up names, so no name's own back-off comes into it: only the address's count.
        codes = [sign_in((one, two)[i % 2], f"nobody-{i}", "wrong password!!") for i in range(30)]
        assert codes == [401] * 30
        # Each process saw 15 failures; the address has made 30, and both refuse it now.
        assert sign_in(one, "nobody-30", "wrong password!!") == 429
        assert sign_in(two, "nobody-31", "wrong password!!") == 429
        assert sign_in(two, "admin", ADMIN_PASSWORD) == 429  # even the right password waits
