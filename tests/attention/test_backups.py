"""agentc-attention check on the installation's backups: a stale verified snapshot and
off-server copy, as the coordinator's own backup status says (the one `backup-status` prints and
the console's Backups page shows), pages once through the real pager (ntfy and webhook on
loopback) and recovers once when the real backup commands have run again."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.attention.kit import Receiver, Setup, attention
from tests.kit.faketime import faketime_env
from tests.kit.live import SERVER, LiveServer, live_server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return tmp_path / "backups"


@pytest.fixture
def server(sqlite_database: str, tmp_path: Path, repo: Path) -> Iterator[LiveServer]:
    with live_server(sqlite_database, tmp_path, "--backup-repository", str(repo)) as found:
        yield found


def _host(live: LiveServer, repo: Path, *args: str, hours_ago: int = 0) -> None:
    """A backup command on the installation's repository, run now or (libfaketime moving its
    clock back) as it would have run hours ago."""
    env = faketime_env(f"-{hours_ago}h") if hours_ago else dict(os.environ)
    command = [SERVER, "--database", live.database, "--backup-repository", str(repo), *args]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr


def _backed_up(live: LiveServer, repo: Path, dest: Path, hours_ago: int = 0) -> None:
    _host(live, repo, "backup", hours_ago=hours_ago)
    _host(live, repo, "backup-copy", "--destination", str(dest), hours_ago=hours_ago)


def test_a_stale_backup_pages_once_and_recovers_once(
    setup: Setup, ntfy: Receiver, hook: Receiver, repo: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "offsite"
    dest.mkdir(mode=0o700)
    _backed_up(setup.server, repo, dest, hours_ago=3)
    config = setup.config(
        ntfy={"url": ntfy.url, "topic": "agentc-test"},
        webhook={"url": hook.url + "/hook"},
        checks={"backups": True, "neglect_days": 0},
    )
    first = attention(config, "check")
    assert first.returncode == 1, first.stdout + first.stderr
    line = (
        "check: backup: backups: the newest verified snapshot is 3 h old; "
        "the newest verified off-server copy is 3 h old"
    )
    assert line in first.stdout, first.stdout
    assert ntfy.titles() == [f"agentc {setup.project_id}: backup failing"]
    assert b"the newest verified snapshot is 3 h old" in ntfy.got[0].body
    sent = hook.got[0].json()
    assert sent["check"] == "backup" and sent["state"] == "failing"

    again = attention(config, "check")  # still stale: quiet
    assert again.returncode == 1 and len(ntfy.got) == 1 and len(hook.got) == 1

    _backed_up(setup.server, repo, dest)
    healthy = attention(config, "check")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert ntfy.titles()[1:] == [f"agentc {setup.project_id}: backup recovered"]
    assert ntfy.got[1].headers["Priority"] == "2" and hook.got[1].json()["state"] == "recovered"
    assert attention(config, "check").returncode == 0
    assert len(ntfy.got) == 2 and len(hook.got) == 2
    state = json.loads((setup.root / "state" / "state.json").read_text())
    assert state["failing"] == {} and state["outbox"] == []


def test_the_check_stays_off_unless_configured(
    setup: Setup, ntfy: Receiver, hook: Receiver
) -> None:
    """No repository has a verified snapshot yet: a failure only where the check is asked for
    (one attention configuration per coordinator pages on its backups)."""
    quiet = setup.config(ntfy={"url": ntfy.url, "topic": "t"}, checks={"neglect_days": 0})
    assert attention(quiet, "check").returncode == 0 and not ntfy.got
    asked = setup.config(
        ntfy={"url": ntfy.url, "topic": "t"}, checks={"backups": True, "neglect_days": 0}
    )
    out = attention(asked, "check")
    assert out.returncode == 1 and "check: backup: backups: --repository:" in out.stdout
    assert "does not exist" in out.stdout and len(ntfy.got) == 1


def test_an_undesignated_agent_cannot_read_the_backups(setup: Setup, ntfy: Receiver) -> None:
    out = setup.server.cli("designate-digest-sender", "--project", setup.project_id, "--clear")
    assert out.returncode == 0, out.stderr
    config = setup.config(
        ntfy={"url": ntfy.url, "topic": "t"}, checks={"backups": True, "neglect_days": 0}
    )
    found = attention(config, "check")
    assert found.returncode == 1
    assert "check: backup: the backup status cannot be read: operation_not_permitted" in (
        found.stdout
    )
