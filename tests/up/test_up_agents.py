"""``agentc up --agents N``: the number of launches at once goes into the supervisor's own
configuration (``[run] launches``) and is kept for later runs; 0 or none leaves it to the loop,
which derives it from the machine; a number out of range is refused before anything is made."""

from __future__ import annotations

from pathlib import Path

from agentc.supervisor.config import load_config
from agentc.up import configs
from agentc.up.layout import Layout
from tests.up.kit import Runner, free_port


def test_a_bad_number_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    runner = Runner(tmp_path)
    for value in ("-1", "257", "two"):
        done = runner.run("up", "--agents", value, "--port", str(free_port()))
        assert done.returncode == 2, done.stderr
        assert "--agents" in done.stderr and "Traceback" not in done.stderr
    assert not (runner.workdir / ".agentc").exists()


def test_the_number_is_the_loop_s_own_setting(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "state")
    layout.root.mkdir(mode=0o700)
    record = {"project_id": "p1", "branch": "main", "agents": 3}
    configs.write_supervisor(layout, record, "http://127.0.0.1:8080", "example")
    assert load_config(layout.supervisor_config).run.launches == 3
    for derived in ({**record, "agents": None}, {"project_id": "p1", "branch": "main"}):
        configs.write_supervisor(layout, derived, "http://127.0.0.1:8080", "example")
        assert load_config(layout.supervisor_config).run.launches is None
