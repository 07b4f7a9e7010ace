"""The loop with the real ``claude`` binary: relay -> gateway -> scripted provider, offline.

Claude Code, driven by the scripted provider, edits a file, commits and submits through the
agent CLI inside its launch; the task reaches waiting_review, the gateway's ledger row of the
launch is reported to the coordinator exactly once, and the heartbeat is written. A rate limit
marks the vendor exhausted, and the next claim goes to the fallback vendor.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentc.files.launchlog import read_log
from agentc.gateway.app import Gateway
from agentc.gateway.config import GatewayConfig
from agentc.testing.gateway import ThreadedGateway
from agentc.testing.provider import ScriptedProvider
from agentc.testing.script import parse_script
from tests.client.kit import admin_get
from tests.kit.live import LiveServer
from tests.supervisor.kit import HARNESS_BIN
from tests.supervisor.loop.kit import SUBMITTING_AGENT, LoopKit, make_loop_kit
from tests.supervisor.loop.review_kit import make_review_kit, submit, workflow

pytestmark = pytest.mark.root

INNER = "127.0.0.1:18789"  # the gateway's address inside every launch
MODEL = "claude-sonnet-5"
SUBMIT = (
    "cd agentc-checkout && echo hi > greeting.txt && git add greeting.txt && "
    'git commit --quiet -m greeting && printf \'%s\' \'{"summary": "greeting added", '
    '"acceptance_evidence": [{"criterion": "greeting exists", "evidence": '
    '"greeting.txt"}]}\' > "$TMPDIR/s.json" && agent-coordinator submissions code '
    '--checkout "$PWD" --input "$TMPDIR/s.json" --json > "$TMPDIR/submitted.json"'
)
USAGE = {"input_tokens": 1200, "cache_creation_input_tokens": 5000, "output_tokens": 40}


@contextlib.contextmanager
def _gateway(short_tmp: Path, user: str | None = None) -> Iterator[tuple[Any, Any, Any]]:
    """A scripted provider behind a real gateway; with ``user``, its control socket and ledger
    belong to that account (the loop runs as it)."""
    secret_dir = Path(tempfile.mkdtemp(prefix=".agc-loop-cred-", dir=Path.home()))
    credential = secret_dir / "claude.key"
    credential.write_text("sk-ant-" + uuid.uuid4().hex + "\n")
    os.chmod(credential, 0o600)
    host = short_tmp / "gw"
    host.mkdir(mode=0o700)
    try:
        with ScriptedProvider(parse_script({"turns": []})) as provider:
            upstream = {"base_url": provider.url, "credential_file": str(credential)}
            config = GatewayConfig.from_mapping(
                {
                    "control_socket": host / "control.sock",
                    "ledger": host / "ledger.jsonl",
                    "vendors": host / "vendors.json",
                    "launch_logs": host / "launch-logs",
                    "upstreams": {"claude": {"api": "anthropic", **upstream}},
                }
            )
            with (
                (host / "gateway.log").open("a") as log,
                ThreadedGateway(Gateway(config, log=log), control=True) as gateway,
            ):
                deadline = time.monotonic() + 10
                while not config.control_socket.exists():
                    assert time.monotonic() < deadline, "no control socket"
                    time.sleep(0.01)
                if user is not None:
                    os.chmod(short_tmp, 0o755)  # noqa: S103 - the account reaches its kit
                    config.ledger.touch(mode=0o600)
                    logs = host / "launch-logs"
                    for path in (host, config.control_socket, config.ledger, logs):
                        shutil.chown(path, user, user)
                yield gateway, config, provider
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)


def _gateway_settings(gateway: Any, config: Any) -> dict[str, Any]:
    return {
        "gateway_listen": INNER,
        "gateway_address": gateway.address,
        "gateway_control": str(config.control_socket),
        "harness_paths": {"claude": str(HARNESS_BIN / "claude")},
        "health": {"ledger": str(config.ledger), "vendors": str(config.vendors)},
        "launch_logs": str(config.launch_logs),
    }


def _allow(loop: LoopKit, role_dir: str, tools: list[str]) -> None:
    settings_dir = loop.state / role_dir / "claude-config"
    settings_dir.mkdir(mode=0o755)
    (settings_dir / "settings.json").write_text(json.dumps({"permissions": {"allow": tools}}))
    os.chmod(settings_dir / "settings.json", 0o644)


@pytest.fixture
def gateway_loop(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> Iterator[tuple[LoopKit, ScriptedProvider]]:
    with _gateway(short_tmp) as (gateway, config, provider):
        settings = _gateway_settings(gateway, config)
        loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT, **settings)
        loop.write_config(harness="claude", model=MODEL)
        _allow(loop, "impl", ["Bash", "Write", "Edit", "Read"])
        yield loop, provider


def _ledger(loop: LoopKit) -> list[dict[str, Any]]:
    path = loop.state.parent.parent / "gw/ledger.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_claude_submits_through_the_cli_and_its_cost_is_reported_once(
    gateway_loop: tuple[LoopKit, ScriptedProvider],
) -> None:
    loop, provider = gateway_loop
    provider.turns = parse_script(
        {
            "turns": [
                {"tool_calls": [{"tool": "run", "command": SUBMIT}], "usage": USAGE},
                {"text": "Submitted.", "usage": {"input_tokens": 30, "output_tokens": 5}},
            ]
        }
    ).expanded()
    task = loop.task()
    result = loop.once(timeout=300)
    assert result.returncode == 0, result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr
    assert loop.show(task["id"])["work_status"] == "waiting_review", loop.tails()
    [final] = loop.records("finished")
    assert final["outcome"] == "left as it is (submitted)"
    rows = [r for r in _ledger(loop) if r["session"] == final["launch_id"]]
    assert rows and {r["attempt"] for r in rows} == {final["attempt"]}
    assert {r["project"] for r in rows} == {loop.project}
    # The loop reported the launch's one row after its poll; a pass by hand sends nothing more.
    reported = (loop.state / "loop/costs.reported").read_text().split()
    assert len(reported) == 1
    again = subprocess.run(
        loop.argv("report-costs"), env=loop.env(), capture_output=True, text=True, timeout=60
    )
    assert json.loads(again.stdout) == dict.fromkeys(
        ("accepted", "duplicates", "rejected", "quarantined", "pending"), 0
    )
    events = loop.admin.get(f"/api/v1/projects/{loop.project}/events").json()["data"]["items"]
    assert sum(1 for e in events if e["kind"] == "telemetry.cost_rows") == 1
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert "Launched" in beat["outcome"]
    # The launch's event log: the gateway's calls, then the loop's push and end; its summary
    # recorded with the submission for the reviewer and the change page.
    read = read_log(loop.state.parent.parent / "gw/launch-logs", final["launch_id"])
    assert read.problems == []
    kinds = [(e["source"], e["event"]) for e in read.events]
    assert kinds[-2:] == [("supervisor", "push"), ("supervisor", "launch_ended")]
    assert {k for k in kinds[:-2]} == {("gateway", "model_call")}
    assert read.events[-2]["ok"] is True and read.events[-1]["exit_code"] == 0
    attempt = f"/api/v1/projects/{loop.project}/attempts/{final['attempt']}"
    summary = admin_get(loop.admin, f"{attempt}/artifacts/launch-log")
    assert summary["submission_id"] == loop.submission(task["id"])["id"]
    assert summary["model_calls"] == len(rows) and summary["unusual"] == []
    assert summary["pushes"][0]["ok"] is True
    assert summary["pushes"][0]["ref"].startswith("refs/agent-coordinator/candidates/")


def test_the_tasks_model_policy_reaches_the_gateway_with_the_launch(
    gateway_loop: tuple[LoopKit, ScriptedProvider],
) -> None:
    """An admin's policy for the task: Claude in the real loop asks within its output limit,
    and its second model turn is refused by the gateway (nothing reaches the provider)."""
    loop, provider = gateway_loop
    provider.turns = parse_script(
        {"turns": [{"tool_calls": [{"tool": "run", "command": "true"}], "repeat": 5}]}
    ).expanded()
    task = loop.task()
    policy = {"expected_revision": 0, "max_turns": 1, "max_output_tokens": 4096}
    path = f"/api/v1/projects/{loop.project}/tasks/{task['id']}/model-policy"
    answer = loop.admin.put(path, json=policy, headers={"Idempotency-Key": str(uuid.uuid4())})
    assert answer.status_code == 200, answer.text
    result = loop.once(timeout=300)
    assert result.returncode == 0, result.stderr
    main = provider.main_requests()
    assert len(main) == 1 and main[0].body["max_tokens"] == 4096
    log = loop.state.parent.parent / "gw/gateway.log"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    refused = [x for x in lines if x["outcome"] == "refused_policy"]
    assert refused and refused[0]["policy"] == "max_turns" and refused[0]["status"] == 402
    assert loop.show(task["id"])["work_status"] == "ready"  # released, nothing submitted


def test_a_loop_breaker_ends_the_attempt_and_its_record_names_it(
    gateway_loop: tuple[LoopKit, ScriptedProvider],
) -> None:
    """Claude stuck on one failing command: the gateway's same-step breaker ends its calls;
    the attempt's run records the ending with the breaker's name, and the handoff says it."""
    loop, provider = gateway_loop
    provider.turns = parse_script(
        {
            "turns": [{"tool_calls": [{"tool": "run", "command": "cat missing.txt"}], "repeat": 20}]
        }  # fmt: skip
    ).expanded()
    task = loop.task()
    result = loop.once(timeout=300)
    assert result.returncode == 0, result.stderr
    assert len(provider.main_requests()) == 5  # the default same_request: the 5th is refused
    [final] = loop.records("finished")
    attempt = f"/api/v1/projects/{loop.project}/attempts/{final['attempt']}"
    run = admin_get(loop.admin, f"{attempt}/artifacts/steps")
    assert run["ending"] == "limit_hit"
    assert "the model gateway ended its calls: breaker same_request" in run["why"]
    handoff = loop.attempt(final["attempt"])["attempt"]["handoff"]
    assert "loop breaker same_request" in handoff
    summary = admin_get(loop.admin, f"{attempt}/artifacts/launch-log")
    assert summary["refused_calls"] == {"refused_breaker": 1}
    assert any("loop breaker" in u for u in summary["unusual"])
    assert loop.show(task["id"])["work_status"] in ("ready", "waiting")


def test_a_rate_limit_routes_the_next_claim_to_the_fallback_vendor(
    gateway_loop: tuple[LoopKit, ScriptedProvider],
) -> None:
    loop, provider = gateway_loop
    reset = int(time.time()) + 3600
    provider.turns = parse_script(
        {"turns": [{"failure": {"kind": "usage_limit", "reset_at": reset}, "repeat": 20}]}
    ).expanded()
    loop.fall_back_to_the_agent()
    loop.write_config(harness="claude", model=MODEL)
    task = loop.task()
    first = loop.once(timeout=300)
    assert first.returncode == 0, first.stderr
    vendors = json.loads((loop.state.parent.parent / "gw/vendors.json").read_text())
    assert vendors["exhausted_until"]["claude"] >= reset * 1000 - 1000
    assert loop.show(task["id"])["work_status"] == "ready"
    loop.put_back(task["id"])  # the coordinator backs it off after an attempt without a submission
    second = loop.once(timeout=300)
    assert second.returncode == 0, second.stderr
    assert loop.show(task["id"])["work_status"] == "waiting_review"
    finals = sorted(loop.records("finished"), key=lambda r: r["recorded_ms"])
    assert [f["vendor"]["harness"] for f in finals] == ["claude", f"command:{loop.agent}"]


# The candidate's test, run by Claude's Bash through candidate-shell: it shows what it sees.
CANDIDATE_TEST = """echo "prefix=[${CLAUDE_CODE_SHELL_PREFIX:-}] token=[${ANTHROPIC_API_KEY:-}]"
if cat "$(dirname "$TMPDIR")/prompt.md" >/dev/null 2>&1; then echo reached-prompt; fi
test -f greeting.txt && echo greeting-present
"""
VERDICT = {
    "decision": "approve",
    "summary": "The greeting is there and the test passes.",
    "findings": ["say hello too"],
    "criteria_evidence": [
        {"criterion": "greeting exists", "evidence": "sh ./test.sh printed greeting-present"}
    ],
    "amendment_decision": None,
}


def test_claude_reviews_through_candidate_shell_and_its_structured_verdict_is_posted(
    server: LiveServer, admin: httpx.Client, short_tmp: Path, account: str
) -> None:
    with _gateway(short_tmp, account) as (gateway, config, provider):
        settings = _gateway_settings(gateway, config)
        loop = make_review_kit(short_tmp, server, admin, account, mode=None, **settings)
        loop.run.update(reviewer=True, reviewer_harness="claude", reviewer_model=MODEL)
        loop.write_config()
        _allow(loop, "rev", ["Bash", "Read", "Glob", "Grep"])
        provider.turns = parse_script(
            {
                "turns": [
                    {"tool_calls": [{"tool": "run", "command": "sh ./test.sh"}], "usage": USAGE},
                    {"tool_calls": [{"tool": "raw", "name": "StructuredOutput", "input": VERDICT}]},
                    {"text": "Reviewed.", "usage": {"input_tokens": 30, "output_tokens": 5}},
                ]
            }
        ).expanded()
        task = submit(loop, CANDIDATE_TEST, {"greeting.txt": "hi\n"})["task"]["id"]
        result = loop.once(timeout=300)
        assert result.returncode == 0, result.stderr
        assert "decision: 'approve'" in result.stderr, (result.stderr, provider.tool_results())
        results = " ".join(provider.tool_results())
        # The command ran in the candidate sandbox: no shell prefix, no model key, no run.
        assert "prefix=[] token=[]" in results and "greeting-present" in results, results
        assert "reached-prompt" not in results
        assert loop.show(task)["work_status"] == "waiting_integration"
        [decision] = workflow(loop, task)["reviews"]
        assert decision["summary"].startswith("The greeting is there and the test passes.")
        assert decision["findings"][0]["remedy"] == "say hello too"
        [final] = loop.records("finished")
        assert final["role"] == "reviewer" and final["outcome"] == "decided: approve"
        rows = [r for r in _ledger(loop) if r.get("session") == final["launch_id"]]
        assert rows and {r["role"] for r in rows} == {"rev"}
        assert {r["attempt"] for r in rows} == {final["attempt"]}
        assert len((loop.state / "loop/costs.reported").read_text().split()) == 1
        assert loop.records() == [] and loop.leftovers() == []
