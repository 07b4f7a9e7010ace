"""The console's backup page through a real coordinator (`serve` with --backup-repository) and
Debian's Chromium: an admin sees what `backup-status` reports as the real backup, off-server copy
and recovery exercise commands change it; a person who is not an admin does not see it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.kit.live import ADMIN_PASSWORD, LiveServer, live_server
from tests.service.console.kit import browser, page, sign_in

__all__ = ["browser", "page"]  # fixtures (page uses this module's server)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return tmp_path / "backups"


@pytest.fixture
def server(sqlite_database: str, tmp_path: Path, repo: Path) -> Iterator[LiveServer]:
    with live_server(sqlite_database, tmp_path, "--backup-repository", str(repo)) as live:
        yield live


def _host(live: LiveServer, repo: Path, *args: str) -> dict[str, object]:
    """A host command on the installation's backup repository setting (no --repository)."""
    out = live.cli("--backup-repository", str(repo), *args, "--json")
    assert out.returncode in (0, 1), out.stderr
    assert "Traceback" not in out.stderr
    found: dict[str, object] = json.loads(out.stdout)
    return found


def _problems(page: Page) -> str:
    return page.locator("#backup-problems").inner_text()


def test_an_admin_sees_the_backup_status_the_commands_report(
    server: LiveServer, page: Page, repo: Path, tmp_path: Path
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="Backups").click()
    page.wait_for_url("**/console/backups")
    expect(page.get_by_role("heading", name="Backups")).to_be_visible()
    assert "does not exist" in _problems(page)  # before the first backup

    snap = _host(server, repo, "backup")["snapshot"]
    assert isinstance(snap, dict)
    page.reload()
    status = page.locator("#backup-status").inner_text()
    assert snap["id"] in status and "min old" in status
    assert "no host-loss protection" in status and "no host-loss protection" in _problems(page)
    assert "never run" in status

    dest = tmp_path / "offsite"
    dest.mkdir(mode=0o700)
    copied = _host(server, repo, "backup-copy", "--destination", str(dest))
    exercised = _host(server, repo, "recovery-exercise", "--scratch", str(tmp_path / "exercise"))
    reported = _host(server, repo, "backup-status")
    assert reported["ok"] is True, reported
    page.reload()
    status = page.locator("#backup-status").inner_text()
    assert page.locator("#backup-problems").count() == 0
    expect(page.locator("#backup-ok")).to_be_visible()
    newest = reported["newest_snapshot"]
    assert isinstance(newest, dict)
    assert str(newest["id"]) in status and str(copied["destination"]) in status
    assert "no host-loss protection" not in status
    assert f"{exercised['total_seconds']:.1f} s, within the one-hour target" in status

    # A damaged record is a problem on the page (and in backup-status), never an error page.
    offsite = repo / "offsite.json"
    offsite.write_text("{not json")
    page.reload()
    assert "offsite.json cannot be read" in _problems(page)
    assert "no host-loss protection" in page.locator("#backup-status").inner_text()
    damaged = _host(server, repo, "backup-status")
    assert damaged["ok"] is False and damaged["host_loss_protection"] is False
    offsite.chmod(0o644)  # readable by others: refused by the private read, reported the same
    page.reload()
    assert "offsite.json cannot be read" in _problems(page)
    # JSON, but not of its shape: a problem too, never a 500 or a traceback.
    (repo / "exercise.json").write_text('{"at": 1}')
    page.reload()
    assert "exercise.json cannot be read (snapshot)" in _problems(page)
    assert "never run" in page.locator("#backup-status").inner_text()
    assert _host(server, repo, "backup-status")["exercise"] is None


def test_a_person_who_is_not_an_admin_does_not_see_the_backups(
    server: LiveServer, repo: Path
) -> None:
    snap = _host(server, repo, "backup")["snapshot"]
    assert isinstance(snap, dict)
    admin = server.admin_client()
    try:
        body = {"name": "olga", "role": "operator", "password": ADMIN_PASSWORD}
        resp = admin.post("/api/v1/admin/people", json=body, headers={"Idempotency-Key": "p1"})
        assert resp.status_code == 201, resp.text
        seen = admin.get("/console/backups")
        assert seen.status_code == 200 and snap["id"] in seen.text
    finally:
        admin.close()
    with httpx.Client(base_url=server.url, timeout=30) as olga:
        resp = olga.post(
            "/api/v1/auth/login",
            json={"username": "olga", "password": ADMIN_PASSWORD},
            headers={"Origin": server.console},
        )
        assert resp.status_code == 200, resp.text
        refused = olga.get("/console/backups")
        assert refused.status_code == 403
        assert "only an admin may see the backups" in refused.text
        assert snap["id"] not in refused.text and str(repo) not in refused.text
        projects = olga.get("/console/projects")
        assert projects.status_code == 200 and "/console/backups" not in projects.text
    with httpx.Client(base_url=server.url, timeout=30) as nobody:  # not signed in: sign-in
        resp = nobody.get("/console/backups", follow_redirects=False)
        assert resp.status_code == 303 and "/console/sign-in" in resp.headers["location"]
