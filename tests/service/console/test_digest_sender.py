"""agent-coordinator-server designate-digest-sender, against a real server: the designated
agent reads the project's attention digest; bad input changes nothing."""

from __future__ import annotations

import httpx

from tests.kit.live import LiveServer


def _digest(live: LiveServer, token: str, pid: str) -> httpx.Response:
    return httpx.get(
        f"{live.url}/api/v1/projects/{pid}/attention", headers={"Authorization": f"Bearer {token}"}
    )


def _sender_events(admin: httpx.Client, pid: str) -> list[str]:
    items = admin.get(f"/api/v1/projects/{pid}/events").json()["data"]["items"]
    return [e["kind"] for e in items if e["kind"].startswith("digest_sender")]


def test_designate_and_clear_the_digest_sender_and_refuse_bad_input(live: LiveServer) -> None:
    admin = live.admin_client()
    try:
        pid = admin.post(
            "/api/v1/projects",
            json={"name": "site", "repository_url": "https://git.example/site.git"},
            headers={"Idempotency-Key": "p1"},
        ).json()["data"]["id"]
        token = live.issue_token("digest-bot", pid, access="read")
        assert _digest(live, token, pid).status_code == 403
        live.issue_token("stranger-bot")  # an agent without the project is never the sender

        for args, message in (
            (("--project", "nope", "--agent", "digest-bot"), "no project nope"),
            (("--project", pid, "--agent", "nobody"), "no agent named nobody"),
            (("--project", pid, "--agent", "admin"), "no agent named admin"),
            (("--project", pid, "--agent", "stranger-bot"), "is not granted project site"),
            (("--project", pid), "give exactly one of --agent NAME and --clear"),
            (("--project", pid, "--agent", "digest-bot", "--clear"), "give exactly one of"),
            (("--agent", "digest-bot"), "Missing option '--project'"),
        ):
            out = live.cli("designate-digest-sender", *args)
            assert out.returncode == 2, args
            assert message in out.stderr and "Traceback" not in out.stderr, out.stderr
            assert out.stdout == ""
        assert _sender(admin, pid) is None and _sender_events(admin, pid) == []

        out = live.cli("designate-digest-sender", "--project", pid, "--agent", "digest-bot")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "agent digest-bot sends the digest of project site"
        got = _digest(live, token, pid)
        assert got.status_code == 200, got.text
        assert got.json()["data"]["digest_sender"]["agent"] == "digest-bot"
        assert _sender_events(admin, pid) == ["digest_sender_designated"]

        out = live.cli("designate-digest-sender", "--project", pid, "--clear")
        assert out.returncode == 0, out.stderr
        assert _digest(live, token, pid).status_code == 403
        assert _sender(admin, pid) is None
        assert _sender_events(admin, pid) == ["digest_sender_designated", "digest_sender_cleared"]
    finally:
        admin.close()


def _sender(admin: httpx.Client, pid: str) -> object:
    return admin.get(f"/api/v1/projects/{pid}/attention").json()["data"]["digest_sender"]
