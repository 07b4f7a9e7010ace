"""The real harness binaries through the gateway, the gateway forwarding to a scripted provider."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from agentc.testing import harnesses
from tests.gateway import kit

CLAUDE_MODEL = "claude-sonnet-5"
REAL_KEY = "sk-ant-REAL-host-only-0123456789abcdef"  # what the credential fixture holds
MakeStack = Any


def _claude(
    tmp_path: Path, url: str, key: str, work: Path, prompt: str = "Do the task.", **kw: Any
) -> harnesses.HarnessRun:
    env = harnesses.claude_env(tmp_path / "home", url, key, max_retries=0)
    assert REAL_KEY not in json.dumps(env)
    return harnesses.run(harnesses.claude_argv(prompt, model=CLAUDE_MODEL, **kw), env, work)


def test_exact_metering_over_a_multi_turn_claude_run(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("claude")
    usage = [
        {"input_tokens": 1200, "cache_creation_input_tokens": 5000, "output_tokens": 40},
        {"input_tokens": 30, "cache_read_input_tokens": 5000, "output_tokens": 25},
        {
            "input_tokens": 12,
            "cache_read_input_tokens": 5200,
            "cache_creation_input_tokens": 90,
            "output_tokens": 7,
        },
    ]
    script = {
        "turns": [
            {"tool_calls": [{"tool": "run", "command": "echo one > one.txt"}], "usage": usage[0]},
            {"tool_calls": [{"tool": "run", "command": "cat one.txt"}], "usage": usage[1]},
            {"text": "All done.", "usage": usage[2]},
        ]
    }
    with make_stack(script) as stack:
        sentinel = stack.issue("sess-meter", task="t1")
        result = _claude(tmp_path, stack.url, sentinel, work)
        reported = stack.provider.reported_total()
        main = stack.provider.main_requests()
        seen_keys = {r.headers.get("x-api-key") for r in stack.provider.requests}
    assert result.returncode == 0, result.stderr
    assert result.of_type("result")[-1]["result"] == "All done."
    assert len(main) == 3
    # The provider got the real key; the harness had only the sentinel.
    assert seen_keys == {REAL_KEY}
    assert REAL_KEY not in result.stdout + result.stderr
    rows = stack.ledger_rows()
    assert {r["session"] for r in rows} == {"sess-meter"}
    assert sum(r["input_tokens"] for r in rows) == reported.input_tokens
    assert sum(r["cache_write_tokens"] for r in rows) == reported.cache_creation_input_tokens
    assert sum(r["cache_read_tokens"] for r in rows) == reported.cache_read_input_tokens
    assert sum(r["output_tokens"] for r in rows) == reported.output_tokens
    assert reported.cache_read_input_tokens == 10200
    main_rows = [r for r in rows if r["input_tokens"] in (1200, 30, 12)]
    assert [r["model"] for r in main_rows] == [CLAUDE_MODEL] * 3
    # $2/M in, $2.5/M cache write, $0.2/M cache read, $10/M out (claude-sonnet-5).
    assert main_rows[0]["usd"] == pytest.approx((1200 * 2 + 5000 * 2.5 + 40 * 10) / 1e6)
    log = stack.log.getvalue()
    assert REAL_KEY not in log and sentinel not in log and "Do the task" not in log
    assert all(line["status"] == 200 for line in stack.log_lines())


def test_codex_is_metered_through_the_gateway(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("codex")
    script = {
        "turns": [
            {
                "tool_calls": [{"tool": "run", "command": "echo hi > codex.txt"}],
                "usage": {"input_tokens": 100, "cache_read_input_tokens": 900, "output_tokens": 11},
            },
            {
                "text": "Done.",
                "usage": {"input_tokens": 50, "cache_read_input_tokens": 1000, "output_tokens": 3},
            },
        ]
    }
    with make_stack(script) as stack:
        sentinel = stack.issue("sess-codex", upstream="codex")
        env = harnesses.codex_env(tmp_path / "home", stack.url, sentinel)
        assert REAL_KEY not in json.dumps(env)
        result = harnesses.run(harnesses.codex_argv("Say hi."), env, work)
        auth = {r.headers.get("authorization") for r in stack.provider.main_requests()}
    assert result.returncode == 0, result.stderr
    assert (work / "codex.txt").read_text() == "hi\n"
    assert auth == {f"Bearer {REAL_KEY}"}
    rows = stack.ledger_rows()
    assert [(r["input_tokens"], r["cache_read_tokens"], r["output_tokens"]) for r in rows] == [
        (100, 900, 11),
        (50, 1000, 3),
    ]
    assert rows[0]["model"] == "gpt-5"


def test_a_cap_reached_mid_run_refuses_the_next_call(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("claude")
    usage = {"input_tokens": 1000, "output_tokens": 0}  # $0.002 per call at $2/M input
    script = {
        "turns": [
            {"tool_calls": [{"tool": "run", "command": "true"}], "usage": usage, "repeat": 5},
        ]
    }
    with make_stack(script, caps={"launch_usd": 0.003, "day_usd": 100.0}) as stack:
        sentinel = stack.issue("sess-cap", task="t-cap")
        result = _claude(tmp_path, stack.url, sentinel, work)
        main = stack.provider.main_requests()
        status = stack.gateway.registry.status("sess-cap")
    # The harness ended by itself (no hang, no retry loop) and reported the refusal.
    final = result.of_type("result")[-1]
    assert final["is_error"] is True
    assert "launch cost cap" in json.dumps(final)
    assert len(main) == 2  # nothing forwarded after the cap
    rows = stack.ledger_rows()
    refused = [r for r in rows if r.get("refused_cap")]
    assert len(refused) == 1 and refused[0]["refused_cap"] == "launch"
    assert refused[0]["input_tokens"] == 0
    assert status["cap"] == "launch"
    assert stack.log_lines()[-1]["outcome"] == "refused_cap"


def test_codex_ends_cleanly_at_a_cap(tmp_path: Path, work: Path, make_stack: MakeStack) -> None:
    kit.needs("codex")
    usage = {"input_tokens": 1000, "output_tokens": 0}  # $0.00125 at $1.25/M (gpt-5)
    script = {
        "turns": [{"tool_calls": [{"tool": "run", "command": "true"}], "usage": usage, "repeat": 5}]
    }
    with make_stack(script, caps={"launch_usd": 0.002}) as stack:
        sentinel = stack.issue("sess-codex-cap", upstream="codex")
        env = harnesses.codex_env(tmp_path / "home", stack.url, sentinel)
        result = harnesses.run(harnesses.codex_argv("Loop."), env, work)
        main = stack.provider.main_requests()
    assert result.returncode == 1
    failed = result.of_type("turn.failed")
    assert failed and "cost cap" in failed[-1]["error"]["message"]
    assert len(main) == 2
    assert [r["refused_cap"] for r in stack.ledger_rows() if r.get("refused_cap")] == ["launch"]


def test_a_429_reaches_the_harness_and_marks_the_vendor_exhausted(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("claude")
    reset = int(time.time()) + 3 * 3600
    script = {"turns": [{"failure": {"kind": "rate_limit", "reset_at": reset}}]}
    with make_stack(script) as stack:
        sentinel = stack.issue("sess-429")
        result = _claude(tmp_path, stack.url, sentinel, work)
        vendors = json.loads(stack.config.vendors.read_text())
    final = result.of_type("result")[-1]
    assert final["is_error"] is True
    assert final["api_error_status"] == 429
    assert vendors["exhausted_until"] == {"claude": reset * 1000}
    line = [e for e in stack.log_lines() if e["status"] == 429][0]
    assert line["outcome"] == "rate_limited"
    assert stack.ledger_rows() == []


def test_claude_sees_the_first_event_before_the_provider_finishes(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("claude")
    script = {"turns": [{"text": "streamed words", "pause": {"after_events": 3, "gate": "g"}}]}
    with make_stack(script) as stack:
        sentinel = stack.issue("sess-stream")
        env = harnesses.claude_env(tmp_path / "home", stack.url, sentinel, max_retries=0)
        argv = harnesses.claude_argv("Stream.", model=CLAUDE_MODEL, partial=True)
        proc = subprocess.Popen(
            argv, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        try:
            saw_delta = False
            for line in proc.stdout:
                event = json.loads(line)
                inner = event.get("event", {}) if event.get("type") == "stream_event" else {}
                if inner.get("type") == "content_block_start":
                    # The harness has the provider's first events while the provider is paused.
                    assert stack.provider.paused("g").is_set()
                    assert not stack.provider.main_requests()[0].finished.is_set()
                    saw_delta = True
                    stack.provider.gate("g").set()
                if event.get("type") == "result":
                    assert event["result"] == "streamed words"
                    break
            assert saw_delta
        finally:
            stack.provider.gate("g").set()
            proc.stdout.close()
            proc.wait(30)
    assert proc.returncode == 0


def test_a_revoked_sentinel_is_refused(tmp_path: Path, work: Path, make_stack: MakeStack) -> None:
    kit.needs("claude")
    with make_stack({"turns": [{"text": "first"}]}) as stack:
        sentinel = stack.issue("sess-rev")
        assert _claude(tmp_path, stack.url, sentinel, work).returncode == 0
        served = len(stack.provider.requests)
        assert stack.gateway.registry.revoke("sess-rev") == 1
        after = _claude(tmp_path, stack.url, sentinel, work)
        assert len(stack.provider.requests) == served  # nothing forwarded
    final = after.of_type("result")[-1]
    assert final["is_error"] is True
    assert stack.log_lines()[-1]["outcome"] == "refused_sentinel"
