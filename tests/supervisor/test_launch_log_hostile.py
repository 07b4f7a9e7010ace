"""The launch's event log against the launch itself (issue 30): a real launch (bwrap, real
Claude Code through the relay and the gateway) whose agent tries to read, forge, truncate,
remove, replace and find its own event log; the host's log comes out whole, its chain
checked, holding the gateway's record of every model call and nothing the agent wrote.

The log directory is put outside every tree a launch masks anyway (not under /tmp, the state
root or a home), so it is the supervisor's ``launch_logs`` mask alone that hides it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from agentc.files.launchlog import read_log
from agentc.testing.script import parse_script
from tests.supervisor.gateway_launch_kit import (
    MODEL,
    MakeEnv,
    claude_settings,
    git_init,
    make_env,
    program,
    stderr_of,
)

pytestmark = pytest.mark.root
assert make_env  # the fixture, used by name

ATTEMPTS = (
    ("read", 'cat "$F"'),
    ("list", 'ls -A "$L" | grep -q .'),
    ("append", 'echo \'{"seq": 99, "forged": true}\' >> "$F"'),
    ("truncate", 'truncate -s 0 "$F"'),
    ("remove", 'rm "$F"'),
    ("rename", 'mv "$F" "$F.gone"'),
    ("replace", 'ln -sf /dev/null "$F"'),
    ("open fd", 'ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -q "$L"'),
    ("find", 'find / -xdev -path "*agc-ll-*" -name "*.jsonl" 2>/dev/null | grep -q .'),
)


def _hostile_script(directory: Path, launch_id: str) -> str:
    lines = [f"L={directory}", f'F="$L/{launch_id}.jsonl"']
    for name, command in ATTEMPTS:
        lines.append(f"if ( {command} ) >/dev/null 2>&1; then echo 'GOT {name}'; "
                     f"else echo 'NO {name}'; fi")  # fmt: skip
    return "; ".join(lines)


def test_the_agent_cannot_reach_or_change_its_launch_log(make_env: MakeEnv) -> None:
    directory = Path(tempfile.mkdtemp(prefix="agc-ll-", dir="/var/lib")) / "launch-logs"
    try:
        with make_env({}, {"claude": program("claude")}, launch_logs=directory) as env:
            claude_settings(env.kit)
            run, clone = env.kit.new_run("Look around.")
            git_init(clone)
            launch_id = str(uuid.uuid4())
            hostile = _hostile_script(directory, launch_id)
            env.provider.turns = parse_script(
                {
                    "turns": [
                        {"tool_calls": [{"tool": "run", "command": hostile}]},
                        {"text": "Done."},
                    ]
                }  # fmt: skip
            ).expanded()
            result = env.kit.launch(
                run, clone, "--harness=claude", f"--session-id={launch_id}", f"--model={MODEL}"
            )
            assert result.returncode == 0, stderr_of(run, result)
            said = "\n".join(env.provider.tool_results())
            read = read_log(directory, launch_id)
            calls = len(env.provider.requests)
    finally:
        shutil.rmtree(directory.parent, ignore_errors=True)
    for name, _ in ATTEMPTS:
        assert f"NO {name}" in said, said
    assert "GOT" not in said
    # The host's log: whole, chained, the gateway's record of each call, nothing forged.
    assert read.problems == []
    assert [e["source"] for e in read.events] == ["gateway"] * calls
    assert {e["event"] for e in read.events} == {"model_call"}
    assert all(e["outcome"] == "ok" and e["model"] == MODEL for e in read.events)
    assert "forged" not in json.dumps(read.events)
