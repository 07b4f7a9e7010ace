"""``agentc up --quiet-hours``: the window goes into the supervisor's own configuration
(``[health] quiet_hours``, the loop's gate), is kept for later runs, and a window that is not
one is refused before anything is made."""

from __future__ import annotations

from pathlib import Path

from agentc.supervisor.config import load_config
from agentc.up import configs
from agentc.up.layout import Layout
from tests.up.kit import Runner, free_port


def test_a_bad_window_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    runner = Runner(tmp_path)
    for window, problem in (
        ("25:00-07:00", "must be a window HH:MM-HH:MM"),
        ("07:00-07:00", "is empty"),
    ):
        done = runner.run("up", "--quiet-hours", window, "--port", str(free_port()))
        assert done.returncode == 2, done.stderr
        assert "agentc: --quiet-hours: " in done.stderr and problem in done.stderr
        assert "Traceback" not in done.stderr
    assert not (runner.workdir / ".agentc").exists()


def test_the_window_is_the_loop_s_own_setting(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "state")
    layout.root.mkdir(mode=0o700)
    record = {"project_id": "p1", "branch": "main", "quiet_hours": "22:00-07:00"}
    configs.write_supervisor(layout, record, "http://127.0.0.1:8080", "example")
    assert load_config(layout.supervisor_config).health.quiet_hours == "22:00-07:00"
    configs.write_supervisor(
        layout, {**record, "quiet_hours": None}, "http://127.0.0.1:8080", "example"
    )
    assert load_config(layout.supervisor_config).health.quiet_hours is None
