"""What the agent did, read from the real recorded streams of Claude Code, Codex and Pi: its
messages, tool calls (commands, results, exit statuses) and files written; bounded."""

from __future__ import annotations

import json

from agentc.supervisor.harness.stream import MAX_DETAIL, MAX_STEPS
from tests.supervisor.test_harness_events import summary_of


def test_claude_steps_a_write_and_its_result() -> None:
    s = summary_of("claude", "success-tool-use-write_cc-1.0.x.guess-claude_code.jsonl")
    files = [step for step in s.steps if step["kind"] == "file"]
    assert files == [
        {
            "kind": "file",
            "name": "Write",
            "detail": "/Users/steve/repos/guess/claude_code/test.txt",
            "ok": True,
        }
    ]
    assert s.steps[-1]["kind"] == "model" and s.steps[-1]["detail"].startswith("Done.")


def test_claude_steps_a_glob_and_a_failed_run_s_error() -> None:
    s = summary_of("claude", "success-tool-use-partial-msgs_cc-2.1.224.awsf.jsonl")
    [glob] = [step for step in s.steps if step["kind"] == "tool"]
    assert glob["name"] == "Glob" and glob["ok"] is True
    failed = summary_of("claude", "error-max-turns_cc-2.1.70.guess-claude_code.jsonl")
    assert failed.steps[-1]["kind"] == "error" and failed.steps[-1]["name"] == "error_max_turns"
    killed = summary_of("claude", "killed-mid-line-prefix_cc-2.1.224.awsf.jsonl")
    assert all(step["kind"] != "error" for step in killed.steps)


def test_codex_steps_a_command_with_its_exit_status_and_a_file_change() -> None:
    s = summary_of("codex", "success-command-execution_cx-0.46.0.agentcmd.jsonl")
    assert s.steps[0] == {
        "kind": "tool",
        "name": "shell",
        "detail": "bash -lc ls",
        "ok": True,
        "exit_code": 0,
    }
    assert s.steps[-1]["kind"] == "model"
    f = summary_of("codex", "success-file-change_cx-0.46.0.agentcmd.jsonl")
    assert {
        "kind": "file",
        "name": "add",
        "ok": True,
        "detail": "/private/tmp/codex-research-test/hello.txt",
    } in f.steps
    failed = summary_of("codex", "usage-limit-turn-failed_cx-gpt-5.hive-mind.jsonl")
    assert [step["kind"] for step in failed.steps] == ["error", "error"]


def test_pi_steps_a_tool_call_and_its_end() -> None:
    s = summary_of("pi", "success-tool-use-two-turns_pi-0.81.1.awsf.jsonl")
    [ls] = [step for step in s.steps if step["kind"] == "tool"]
    assert ls == {"kind": "tool", "name": "ls", "detail": "{}", "ok": True}
    assert s.steps[-1]["kind"] == "model"
    killed = summary_of("pi", "killed-mid-line-prefix_pi-0.81.1.awsf.jsonl")
    assert all("ok" not in step for step in killed.steps if step["kind"] == "tool")


def test_steps_are_bounded() -> None:
    from agentc.supervisor.harness.events import summarize

    item = {"type": "command_execution", "command": "x" * 10_000, "exit_code": 2}
    line = json.dumps({"type": "item.completed", "item": item}).encode() + b"\n"
    s = summarize("codex", line * (MAX_STEPS + 7))
    assert len(s.steps) == MAX_STEPS and s.steps_dropped == 7
    assert len(s.steps[0]["detail"]) == MAX_DETAIL and s.steps[0]["exit_code"] == 2
    assert s.steps[0]["ok"] is False


def test_an_exit_status_no_store_holds_is_left_out() -> None:
    from agentc.supervisor.harness.stream import State

    s = State()
    for code in (1 << 40, -(1 << 40), True, "1", 3):
        s.step("tool", "shell", "x", ok=False, exit_code=code, ref=str(code))
    assert [step.exit_code for step in s.steps] == [None, None, None, None, 3]
    s.ended("3", ok=False, exit_code=1 << 50)
    assert s.steps[-1].exit_code is None
