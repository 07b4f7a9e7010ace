"""The backup status for the agent that pages (GET /api/v1/projects/{id}/attention/backups), on
both databases: the very status `backup-status` prints and the console's Backups page shows, at
the service's time; read by admins and the project's designated digest sender only, and without
where the repository is or what the snapshots hold."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentc.service.backup import NO_HOST_LOSS, NOT_CONFIGURED
from agentc.service.work.attention import designate_sender
from tests.service.kit import ApiError, Caller, Clock, Service, running

HOUR_S = 3600


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return tmp_path / "backups"


@pytest.fixture
def svc(database: str, clock: Clock, repo: Path) -> Iterator[Service]:
    with running(database, clock, backup_repository=str(repo)) as service:
        yield service


def _status(caller: Caller, pid: str) -> dict[str, Any]:
    found: dict[str, Any] = caller.get(f"/api/v1/projects/{pid}/attention/backups")
    return found


def _host(svc: Service, *args: str) -> dict[str, Any]:
    """A host command on the installation's repository setting, on the service's clock."""
    out = svc.host("--backup-repository", svc.settings.backup_repository or "", *args, "--json")
    assert out.returncode in (0, 1), out.stderr
    found: dict[str, Any] = json.loads(out.stdout)
    return found


def test_the_status_is_backup_status_s_at_the_service_s_time(
    svc: Service, clock: Clock, repo: Path, tmp_path: Path
) -> None:
    pid = svc.project()
    missing = _status(svc.admin, pid)
    assert missing["ok"] is False and missing["readable"] is False
    assert "does not exist" in missing["problems"][0]

    snapshot = _host(svc, "backup")["snapshot"]
    found = _status(svc.admin, pid)
    assert found["ok"] is False and found["problems"] == [NO_HOST_LOSS]
    assert found["snapshots"] == 1 and found["snapshot_at"] is not None
    assert found["host_loss_protection"] is False and found["offsite_at"] is None
    dest = tmp_path / "offsite"
    dest.mkdir(mode=0o700)
    _host(svc, "backup-copy", "--destination", str(dest))
    clock.advance(HOUR_S)
    fresh = _status(svc.admin, pid)
    assert fresh["ok"] is True and fresh["problems"] == []
    # the host command's clock started at the service's and ran on while it worked
    assert 59 * 60_000 < fresh["snapshot_age_ms"] <= HOUR_S * 1000
    assert fresh["max_age_ms"] == 2 * HOUR_S * 1000
    assert fresh == {**fresh, "host_loss_protection": True, "readable": True}
    # What the host command prints is what the route says, problem for problem.
    clock.advance(2 * HOUR_S + 30)
    stale = _status(svc.admin, pid)
    printed = _host(svc, "backup-status")
    assert stale["ok"] is False and stale["problems"] == printed["problems"]
    assert stale["problems"][0] == "the newest verified snapshot is 3 h old"
    assert "off-server copy is 3 h old" in stale["problems"][1]
    # Where the repository and the copies are, and what the snapshots hold, stay on the host.
    text = json.dumps(stale)
    assert str(repo) not in text and str(dest) not in text and snapshot["sha256"] not in text


def test_only_admins_and_the_designated_sender_read_it(svc: Service) -> None:
    pid, other = svc.project(), svc.project()
    sender = svc.agent(pid, other, name="digest-bot", access="read", session=False)
    stranger = svc.agent(pid, name="stranger", session=False)
    svc.executor.write(lambda tx: designate_sender(tx.conn, tx.now, pid, "digest-bot"))
    assert _status(sender, pid)["readable"] is False  # no backup taken yet: still an answer
    for caller, project in (
        (stranger, pid),  # an agent of the project, not designated
        (sender, other),  # designated for another project
        (svc.person(pid), pid),  # a person of the project who is not an admin
    ):
        with pytest.raises(ApiError) as err:
            _status(caller, project)
        assert err.value.status == 403, (caller, project)
    with pytest.raises(ApiError) as err:  # a person of another project: not even its existence
        _status(svc.person(other), pid)
    assert err.value.status == 404


def test_no_repository_configured_is_a_problem_not_an_error(database: str, clock: Clock) -> None:
    with running(database, clock) as svc:
        found = _status(svc.admin, svc.project())
    assert found["ok"] is False and found["problems"] == [NOT_CONFIGURED]
