"""Adding a harness is one adapter module and one line in the registry: a fake fifth harness,
added that way, is configured, planned, launched in the real sandbox and its stream parsed."""

from __future__ import annotations

import importlib.util
import json
import textwrap
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from agentc.core.errors import SupervisorError
from agentc.core.roles import Role
from agentc.supervisor.config import load_config
from agentc.supervisor.harness import env as harness_env
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.events import StreamReader
from agentc.supervisor.launch import execute as launch_execute
from agentc.supervisor.launch import preflight
from agentc.supervisor.launch.plan import plan
from agentc.supervisor.launch.request import LaunchRequest
from agentc.supervisor.loop.settings import harness_name
from tests.supervisor.kit import Kit, write_config

# The whole adapter module a new harness needs (its stream: one JSON object per line).
MODULE = """
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentc.supervisor.harness.base import Adapter
from agentc.supervisor.harness.env import HarnessSetup, ModelEndpoint


class Echo(Adapter):
    name = "echo"
    quiet_env = {"ECHO_OFFLINE": "1"}

    def args(self, request):
        return ("--task-from-stdin", "--model", request.model)

    def env(self, layout, request):
        return {"ECHO_HOME": str(layout.run / "state/home")}

    def model_setup(self, endpoint: ModelEndpoint, *, home: Path, codex_home: Path):
        return HarnessSetup({"ECHO_KEY": endpoint.key}, {home / "echo.json": endpoint.base_url})

    def parse(self, state, event: Mapping[str, Any]) -> None:
        if event.get("kind") == "said":
            state.final_text = event["text"]
        elif event.get("kind") == "done":
            state.completed = True
"""

# The harness itself: reports its flags, its variables and its stdin as events.
PROGRAM = textwrap.dedent(
    """\
    #!/bin/sh
    printf '{"kind":"said","text":"%s|%s|%s|%s"}\\n' "$*" "$ECHO_HOME" "$ECHO_OFFLINE" "$(cat)"
    printf '{"kind":"done"}\\n'
    """
)


@pytest.fixture
def echo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    path = tmp_path / "echo_harness.py"
    path.write_text(MODULE)
    spec = importlib.util.spec_from_file_location("echo_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(registry.HARNESSES, "echo", module.Echo())  # the one line
    return module


def _request(kit: Kit, role: Role = "implementer") -> LaunchRequest:
    run, clone = kit.new_run("the task\n", role)
    launch_id = str(uuid.uuid4())
    return LaunchRequest(
        role=role, harness="echo", run=run, clone=clone, launch_id=launch_id, model="m1"
    )


def _configure(kit: Kit) -> None:
    program = kit.bin / "echo"
    program.write_text(PROGRAM)
    program.chmod(0o755)
    kit.settings["harness_paths"] = {**kit.settings["harness_paths"], "echo": str(program)}
    write_config(kit)


def test_an_unregistered_harness_is_refused_everywhere(kit: Kit) -> None:
    with pytest.raises(ValueError, match="must be one of claude, codex, pi or command"):
        harness_name("echo")
    with pytest.raises(SupervisorError, match="unknown harness 'echo'"):
        plan(load_config(kit.config), _request(kit))
    with pytest.raises(ValueError, match="unknown harness 'echo'"):
        StreamReader("echo")


def test_a_fifth_harness_is_one_module_and_one_line(kit: Kit, echo: ModuleType) -> None:
    assert harness_name("echo") == "echo" and "echo" in registry.names()
    _configure(kit)
    config = load_config(kit.config)
    request = _request(kit)
    planned = plan(config, request)
    assert planned.description.harness_argv[-3:] == ("--task-from-stdin", "--model", "m1")
    assert planned.env["ECHO_HOME"] == str(request.run / "state/home")
    assert planned.env["ECHO_OFFLINE"] == "1"
    assert planned.token is None  # no token opt-in for it: it reaches its model by the gateway
    assert not preflight.launch_problems(config, planned)
    outcome = launch_execute.execute(planned)
    assert (outcome.reason, outcome.exit_code) == ("exited", 0)
    reader = StreamReader("echo")
    reader.feed((request.run / "events.jsonl").read_bytes())
    summary = reader.summary()
    assert summary.completed and summary.harness == "echo"
    flags, home, quiet, stdin = (summary.final_text or "").split("|")
    assert flags == "--task-from-stdin --model m1"
    assert (home, quiet, stdin) == (str(request.run / "state/home"), "1", "the task")


def test_the_fifth_harness_gets_the_gateway_and_may_not_review(
    kit: Kit, echo: ModuleType, tmp_path: Path
) -> None:
    endpoint = harness_env.ModelEndpoint("http://127.0.0.1:18788", "agc-sentinel")
    setup = registry.model_setup("echo", endpoint, home=tmp_path, codex_home=tmp_path)
    assert setup.env == {"ECHO_KEY": "agc-sentinel"}
    assert setup.files == {tmp_path / "echo.json": "http://127.0.0.1:18788"}
    _configure(kit)
    with pytest.raises(SupervisorError, match="a echo reviewer cannot have its commands"):
        plan(load_config(kit.config), _request(kit, "reviewer"))


def test_every_registered_harness_parses_its_own_stream_only() -> None:
    line = json.dumps({"kind": "said", "text": "x"}).encode() + b"\n"
    for name in registry.names():
        reader = StreamReader(name)
        reader.feed(line)
        assert reader.summary().final_text is None, name


def test_the_agent_clis_shim_is_where_a_launch_looks_for_it() -> None:
    # A launch from a source tree puts this directory on the harness's PATH (launch.plan).
    from agentc.supervisor.launch.plan import SHIM_DIR

    assert (SHIM_DIR / "agent-coordinator").is_file()
