from __future__ import annotations

import httpx

from tests.kit.live import LiveServer


def test_live_server_serves_and_bootstraps(live: LiveServer) -> None:
    admin = live.admin_client()
    try:
        resp = admin.post(
            "/api/v1/projects",
            json={"name": "p", "repository_url": "https://x/y"},
            headers={"Idempotency-Key": "k1"},
        )
        pid = resp.json()["data"]["id"]
    finally:
        admin.close()
    token = live.issue_token("worker", pid)
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as agent:
        assert agent.get(f"/api/v1/projects/{pid}").json()["data"]["name"] == "p"
