"""``agentc up`` runs agentc-attention itself: ``agentc canary`` runs the end-to-end canary on
demand (the bundled example agent implements the canary task, reviews it, the integrator lands
it), and the built-in scheduler runs the checks at their interval (``up.json``'s ``schedule``),
paging into ``logs/pages.jsonl`` only when something fails."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, free_port, stop, wait_for

pytestmark = [pytest.mark.root, pytest.mark.slow]  # a throwaway user needs root


@pytest.fixture
def user() -> Iterator[str]:
    name = create_user("agentc-a")
    try:
        yield name
    finally:
        delete_user(name)


def test_the_canary_on_demand_and_the_scheduled_checks(user: str) -> None:
    entry = pwd.getpwnam(user)
    work = Path(entry.pw_dir) / "canary"
    work.mkdir()
    os.chown(work, entry.pw_uid, entry.pw_gid)
    runner = Runner(work, user)
    state = work / ".agentc"
    port = str(free_port())
    assert "not running" in runner.run("canary").stderr  # nothing to canary yet
    proc = runner.start("up", "--port", port, "--no-live")
    try:
        wait_for(lambda: runner.status(), 120, lambda: proc.poll())
        done = runner.run("canary", timeout=600)
        logs = "\n".join(p.read_text()[-2000:] for p in sorted((state / "logs").glob("*.log")))
        assert done.returncode == 0, done.stdout + done.stderr + logs
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    [row] = [
        json.loads(x) for x in (state / "attention/canary-results.jsonl").read_text().splitlines()
    ]
    assert row["outcome"] == "ok" and row["host"] == "agentc-up" and row["served_by"] is None
    reported = json.loads((state / "attention/canary-reported.json").read_text())
    assert len(reported) == 1
    for private in ("attention.toml", "credentials/attention.token"):
        assert os.stat(state / private).st_mode & 0o777 == 0o600, private

    # The scheduler: checks every 2 s after a restart; all is well, so nothing pages. The
    # attention credential's file is gone, as if an up died after issuing it: a new one is
    # issued beside the lost one.
    (state / "credentials/attention.token").unlink()
    record = json.loads((state / "up.json").read_text())
    record["schedule"] = {"check_seconds": 2}
    (state / "up.json").write_text(json.dumps(record))
    proc = runner.start("up", "--port", port, "--no-live")
    try:
        wait_for(lambda: (state / "attention/state.json").exists(), 120, lambda: proc.poll())
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    assert (state / "logs/attention-check.log").exists()  # a healthy run prints nothing
    saved = json.loads((state / "attention/state.json").read_text())
    assert saved["failing"] == {} and saved["outbox"] == [], saved
    assert not (state / "logs/pages.jsonl").exists()
