"""The launch path stays lean: imports, never wall-clock time (docs/benchmarks.md).

A launch starts a Python interpreter per call, so what it imports is most of what it costs.
The entry point parses a plain ``launch`` command line itself; the click application parses
every other one, and both must give the same parameters.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentc.supervisor import commands
from agentc.supervisor.launch.request import parse_launch
from tests.supervisor.kit import Kit

# Heavy packages no launch may import (the relays' asyncio runs only inside the sandbox, in
# netns-relay, and only when relays are configured; the kit configures none).
FORBIDDEN = {
    "pydantic", "pydantic_core", "asyncio", "httpx", "sqlalchemy", "rich", "click",
    "uvicorn", "anyio", "fastapi", "starlette",
}  # fmt: skip


def imported(stderr: str) -> set[str]:
    """The name of every module in ``python -X importtime`` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rpartition("|")[2].strip())
    return names


@pytest.mark.root
def test_a_launch_imports_no_heavy_package(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    argv = kit.argv(run, clone)
    assert argv[1:3] == ["-m", "agentc.supervisor.cli"]
    argv.insert(1, "-X")
    argv.insert(2, "importtime")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert result.returncode == 0, result.stderr[-2000:]
    assert '"reason": "exited"' in result.stdout
    modules = imported(result.stderr)
    names = {m.split(".")[0] for m in modules}
    assert "agentc.supervisor.launch.run" in modules and "tomllib" in names  # the output parses
    # The session is established in this process (agentns's resolver, no exec): one
    # interpreter imports the launch modules, once, and agentns-claude's CLI is not loaded.
    assert (
        "agentc.supervisor.launch.agentsession" in modules and "agentns_session_id" in result.stdout
    )
    assert "agentc.agentns.resolve" in modules and "agentc.agentns.cli" not in modules
    timed = [x.rpartition("|")[2].strip() for x in result.stderr.splitlines() if "|" in x]
    assert timed.count("agentc.supervisor.launch.run") == 1
    assert not names & FORBIDDEN, sorted(names & FORBIDDEN)
    # Without the gateway (the kit turns it off) its lease client is not loaded either.
    assert not any(m.startswith("agentc.gateway") for m in modules)


def test_the_entry_point_and_the_launch_modules_import_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "import agentc.supervisor.cli, agentc.supervisor.config, agentc.supervisor.launch.run\n"
        "import agentc.supervisor.launch.plan, agentc.supervisor.launch.execute\n"
        "import agentc.supervisor.launch.preflight, agentc.sandbox.bwrap\n"
        "import agentc.supervisor.launch.agentsession, agentc.agentns.cli, agentc.agentns.resolve\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    names = set(result.stdout.split())
    assert "agentc" in names
    assert not names & FORBIDDEN, sorted(names & FORBIDDEN)


UUID = "8f3d9080-83bd-4add-a4ee-368ba5f76e5b"
PLAIN = [
    ["--role", "implementer", "--run", "/r", "--clone", "/c"],
    ["--role=reviewer", "--run=/r", "--clone=/c", "--harness=codex", "--model=o3"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--session-id", UUID.upper()],
    ["--role=implementer", "--run=/r", "--clone=/c", "--attempt", "a1", "--task", "t 9"],
    ["--role=implementer", "--run=/r", "--clone=/c", "--generation", "007"],
    ["--role=implementer", "--run=/r", "--clone=/c", "--launch-usd", "1.25", "--dry-run"],
    ["--role=implementer", "--run=/r", "--clone=/c", "--launch-usd=3"],
    ["--role=implementer", "--run=/r", "--clone=/c", "--", "-p", "--model", "x", "--", "y"],
    ["--dry-run", "--clone", "/c", "--run", "/r", "--role", "implementer", "--"],
]
# Left to click (which then parses, or refuses, them itself).
UNUSUAL = [
    [],
    ["--help"],
    ["--role", "implementer", "--run", "/r"],
    ["--role", "admin", "--run", "/r", "--clone", "/c"],
    ["--role", "implementer", "--role", "reviewer", "--run", "/r", "--clone", "/c"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--generation", "-1"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--generation", "1_0"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--launch-usd", "1e3"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--session-id", "nope"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--model", ""],
    ["--role", "implementer", "--run", "--clone", "/c"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "extra"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--unknown", "x"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--dry-run=yes"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--dry-run", "--dry-run"],
    ["--role", "implementer", "--run", "/r", "--clone", "/c", "--rol", "implementer"],
]


@pytest.mark.parametrize("args", PLAIN)
def test_the_fast_parser_agrees_with_click(args: list[str]) -> None:
    parsed = parse_launch(["--config", "/etc/s.toml", "launch", *args])
    assert parsed is not None
    config_path, params = parsed
    assert config_path == Path("/etc/s.toml")
    assert params == commands.launch.make_context("launch", list(args)).params
    assert parse_launch(["--config=/x", "launch", *args]) == (Path("/x"), params)
    assert parse_launch(["launch", *args]) == (None, params)


@pytest.mark.parametrize("args", UNUSUAL)
def test_anything_unusual_is_left_to_click(args: list[str]) -> None:
    assert parse_launch(["launch", *args]) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["preflight", "--role", "implementer", "--run", "/r", "--clone", "/c"],
        ["--config", "--help", "launch", "--role=implementer", "--run=/r", "--clone=/c"],
        ["--config=", "launch", "--role=implementer", "--run=/r", "--clone=/c"],
        ["--verbose", "launch", "--role=implementer", "--run=/r", "--clone=/c"],
    ],
)
def test_other_command_lines_are_left_to_click(argv: list[str]) -> None:
    assert parse_launch(argv) is None
