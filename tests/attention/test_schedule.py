"""``agentc up``'s built-in scheduler: each job's first run one interval after it was first
seen, then one run per interval; its record of when each job last started survives damage
(a damaged record is a first sight again, never a crash of up's watch loop)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentc.attention.config import AttentionConfig
from agentc.attention.schedule import Scheduler


@pytest.fixture
def scheduler(tmp_path: Path) -> Scheduler:
    state = tmp_path / "state"
    config = tmp_path / "attention.toml"
    config.write_text(
        'origin = "http://127.0.0.1:9"\nproject_id = "p"\n'
        f'token_file = "{tmp_path / "token"}"\nstate_dir = "{state}"\n'
        "[schedule]\ncheck_seconds = 60\ndigest_seconds = 3600\ncanary_seconds = 7200\n"
    )
    state.mkdir(mode=0o700)
    settings = AttentionConfig.load(config, what="attention configuration")
    logs = tmp_path / "logs"
    logs.mkdir()
    return Scheduler(["/bin/true"], config, settings, "example", logs, {"PATH": "/usr/bin:/bin"})


def test_jobs_run_one_interval_after_first_sight_then_each_interval(scheduler: Scheduler) -> None:
    assert scheduler.tick(1000.0) == []
    assert scheduler.tick(1059.0) == []
    assert scheduler.tick(1060.0) == ["check"]  # first check: after a minute
    scheduler.stop()
    assert scheduler.tick(1061.0) == []
    assert scheduler.tick(1121.0) == ["check"]
    scheduler.stop()
    assert scheduler.tick(4600.0) == ["check", "digest"]
    scheduler.stop()


@pytest.mark.parametrize(
    "damage", ['{"check": "soon"}', '{"check": null}', "[1, 2]", "{not json", '{"check": [1]}']
)
def test_a_damaged_record_is_a_first_sight_again(scheduler: Scheduler, damage: str) -> None:
    scheduler.state_file.write_text(damage)
    scheduler.state_file.chmod(0o600)
    assert scheduler.tick(5000.0) == []  # no crash, and nothing run at once
    marks = json.loads(scheduler.state_file.read_text())
    assert set(marks) == {"check", "digest", "canary"}
    assert scheduler.tick(5060.0) == ["check"]
    scheduler.stop()
