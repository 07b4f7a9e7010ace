"""deploy/Caddyfile.example in front of a real service on loopback: Caddy (the Debian package,
scripts/setup --dev) terminates TLS with its internal CA for ``localhost`` and proxies to the
service; a request within the body limit goes through, one over it is refused by Caddy and
never reaches the service."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentc.service.settings import ServerSettings
from tests.deploy.test_deploy_files import DEPLOY
from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server
from tests.kit.pg import free_port

CADDY = shutil.which("caddy")


def _caddyfile(tmp: Path, port: int, upstream: str) -> Path:
    """The example, its hostname and upstream made this test's, with global options that keep
    Caddy to loopback and this folder: no admin endpoint, no port 80, no system trust store."""
    site = (DEPLOY / "Caddyfile.example").read_text()
    site = site.replace("coordinator.example.com", f"localhost:{port}")
    site = site.replace("127.0.0.1:8080", upstream)
    options = (
        "{\n\tadmin off\n\tauto_https disable_redirects\n\tskip_install_trust\n\tlocal_certs\n"
        f"\thttp_port {free_port()}\n\tstorage file_system {tmp / 'data'}\n}}\n"
    )
    path = tmp / "Caddyfile"
    path.write_text(options + site)
    return path


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[LiveServer, str, Path]]:
    assert CADDY is not None, "caddy is not installed: run scripts/setup --dev"
    port = free_port()
    origin = f"https://localhost:{port}"
    database = str(tmp_path / "db.sqlite3")
    with live_server(database, tmp_path, "--public-origin", origin) as live:
        config = _caddyfile(tmp_path, port, live.url.removeprefix("http://"))
        env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "xdg"), "PATH": "/usr/bin"}
        env["XDG_CONFIG_HOME"] = env["XDG_DATA_HOME"]
        log = (tmp_path / "caddy.log").open("wb")
        proc = subprocess.Popen(
            [CADDY, "run", "--config", str(config), "--adapter", "caddyfile"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        root = tmp_path / "data" / "pki" / "authorities" / "local" / "root.crt"
        try:
            deadline = time.monotonic() + 60
            while not _answers(origin, root):
                assert proc.poll() is None, (tmp_path / "caddy.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "caddy.log").read_text()
                time.sleep(0.2)
            yield live, origin, root
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()


def _answers(origin: str, root: Path) -> bool:
    if not root.exists():
        return False
    try:
        return (
            httpx.get(
                origin + "/healthz", verify=ssl.create_default_context(cafile=root), timeout=2
            ).status_code
            == 200
        )
    except httpx.HTTPError:
        return False


def test_caddy_in_front_enforces_the_body_limit(proxied: tuple[LiveServer, str, Path]) -> None:
    _live, origin, root = proxied
    limit = ServerSettings.model_fields["json_body_limit_bytes"].default
    admin = httpx.Client(
        base_url=origin, verify=ssl.create_default_context(cafile=root), timeout=30
    )
    signed = admin.post(
        "/api/v1/auth/login",
        json={"username": "admin", "password": ADMIN_PASSWORD},
        headers={"Origin": origin},
    )
    assert signed.status_code == 200, signed.text
    admin.headers.update({"Origin": origin, "X-CSRF-Token": signed.json()["data"]["csrf_token"]})
    made = admin.post(
        "/api/v1/projects",
        json={"name": "through-caddy", "repository_url": "https://x/y"},
        headers={"Idempotency-Key": "k1"},
    )
    assert made.status_code == 201, made.text
    path, key = "/api/v1/projects", {"Idempotency-Key": "k2", "Content-Type": "application/json"}
    # A body of the service's limit reaches the service (its answer, not Caddy's): Caddy's
    # limit is not below the service's ("1MB" in Caddy is 10^6 bytes, and such a body got 502).
    body = _project_of_size(limit)
    answered = admin.post(path, content=body, headers=key)
    assert answered.status_code == 422 and answered.json()["error"]["code"], answered.text
    # One byte more is refused, with its length given or streamed without one (chunked).
    over = _project_of_size(limit + 1)
    refused = admin.post(path, content=over, headers=key)
    assert refused.status_code == 413, refused.text  # Caddy's, from the length it was told
    assert refused.json()["error"]["code"] == "payload_too_large"
    streamed = admin.post(path, content=iter([over[:1000], over[1000:]]), headers=key)
    assert streamed.status_code in (413, 502), streamed.text
    names = [p["name"] for p in admin.get("/api/v1/projects").json()["data"]["items"]]
    assert names == ["through-caddy"]
    admin.close()


def _project_of_size(size: int) -> bytes:
    """A project's JSON of exactly size bytes (its description too long for the service)."""
    head, tail = b'{"name": "big", "repository_url": "https://x/y", "description": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail
