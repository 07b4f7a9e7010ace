"""``agentc up --harness claude``: one word switches to the real Claude Code binary. The
credential found in the environment goes to the model gateway ``up`` runs, never into a launch;
Claude (driven by the scripted provider standing in for Anthropic's API, offline) edits,
commits and submits through the agent CLI inside its launch, and the call's cost is metered."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from agentc.testing.provider import ScriptedProvider
from agentc.testing.script import parse_script
from tests.supervisor.kit import HARNESS_BIN
from tests.up.kit import Runner, file_task, free_port, stop, wait_for

pytestmark = pytest.mark.root

SUBMIT = (
    "cd agentc-checkout && echo hi > greeting.txt && git add greeting.txt && "
    'git commit --quiet -m greeting && printf \'%s\' \'{"summary": "greeting added", '
    '"acceptance_evidence": [{"criterion": "greeting exists", "evidence": '
    '"greeting.txt"}]}\' > "$TMPDIR/s.json" && agent-coordinator submissions code '
    '--checkout "$PWD" --input "$TMPDIR/s.json" --json > "$TMPDIR/submitted.json"'
)
USAGE = {"input_tokens": 1200, "output_tokens": 40}


def test_claude_through_the_gateway_up_runs(tmp_path: Path) -> None:
    assert (HARNESS_BIN / "claude").exists(), "run scripts/setup --dev"
    secret = "sk-ant-" + uuid.uuid4().hex
    runner = Runner(tmp_path)
    port = free_port()
    with ScriptedProvider(parse_script({"turns": []})) as provider:
        provider.turns = parse_script(
            {
                "turns": [
                    {"tool_calls": [{"tool": "run", "command": SUBMIT}], "usage": USAGE},
                    {"text": "Submitted.", "usage": {"input_tokens": 30, "output_tokens": 5}},
                ]
            }
        ).expanded()
        env = runner.env()
        env["PATH"] = f"{HARNESS_BIN}:{env['PATH']}"
        env.update(ANTHROPIC_API_KEY=secret, ANTHROPIC_BASE_URL=provider.url)
        proc = runner.start("up", "--harness", "claude", "--port", str(port), "--no-live", env=env)
        state = tmp_path / ".agentc"
        try:
            record = wait_for(
                lambda: (
                    (state / "up.json").exists() and json.loads((state / "up.json").read_text())
                ),
                120,
                lambda: proc.poll(),
            )
            task = file_task(
                state,
                record["project_id"],
                "add a greeting",
                ["greeting exists"],
            )

            def submitted() -> dict[str, object] | None:
                assert proc.poll() is None, proc.communicate()[0]
                snap = runner.status(env=env)
                return (
                    snap
                    if snap and snap["tasks"]["ready"] == 0 and snap["tasks"]["in_progress"] == 0
                    else None
                )

            snap = wait_for(
                submitted, 300, lambda: (state / "logs/supervisor.log").read_text()[-3000:]
            )
        finally:
            out = stop(proc)
    assert proc.returncode == 0, out
    assert snap["cost_usd"] > 0, snap
    ledger = [
        json.loads(line) for line in (state / "gateway/ledger.jsonl").read_text().splitlines()
    ]
    assert ledger and {row["task"] for row in ledger} == {task}, ledger
    assert {row["project"] for row in ledger} == {record["project_id"]}
    # The credential is the gateway's alone: 0600 in its directory, in no configuration the
    # supervisor or a launch reads, and nowhere in the supervisor's state.
    credential = state / "gateway/credentials/claude"
    assert credential.read_text().strip() == secret
    assert os.stat(credential).st_mode & 0o777 == 0o600
    for path in (state / "supervisor.toml", state / "integrator.toml"):
        assert secret not in path.read_text()
    for dirpath, _dirs, files in os.walk(state / "supervisor"):
        for name in files:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                assert secret.encode() not in path.read_bytes(), path
