"""agent-coordinator-server recover-operator-password, against a real server."""

from __future__ import annotations

import sqlite3

import httpx

from tests.kit.live import ADMIN_PASSWORD, LiveServer

NEW = "a recovered passphrase here"


def _sign_in(live: LiveServer, password: str) -> int:
    resp = httpx.post(
        live.url + "/api/v1/auth/login",
        json={"username": "admin", "password": password},
        headers={"Origin": live.url},
    )
    return resp.status_code


def test_recovery_resets_the_password_and_ends_sessions(live: LiveServer) -> None:
    admin = live.admin_client()
    try:
        assert admin.get("/api/v1/me").status_code == 200
        out = live.cli(
            "recover-operator-password", "--username", "admin", "--password-stdin", stdin=NEW + "\n"
        )
        assert out.returncode == 0, out.stderr
        assert admin.get("/api/v1/me").status_code == 401  # the session ended at once
    finally:
        admin.close()
    assert _sign_in(live, ADMIN_PASSWORD) == 401
    assert _sign_in(live, NEW) == 200
    if not live.database.startswith("postgresql"):
        kinds = sqlite3.connect(live.database).execute("SELECT kind FROM events").fetchall()
        assert ("password_recovered_by_host",) in kinds


def test_recovery_refuses_unknown_people_and_agents_and_short_passwords(live: LiveServer) -> None:
    live.issue_token("robot")
    for name in ("nobody", "robot"):
        out = live.cli(
            "recover-operator-password", "--username", name, "--password-stdin", stdin=NEW + "\n"
        )
        assert out.returncode != 0 and "Traceback" not in out.stderr
        assert f"no person named {name}" in out.stderr
    out = live.cli(
        "recover-operator-password", "--username", "admin", "--password-stdin", stdin="short\n"
    )
    assert out.returncode != 0 and "12 to 1024" in out.stderr
    assert _sign_in(live, ADMIN_PASSWORD) == 200
