"""Loop breakers (issue 30): the same step again, calls that use no tool, a cache-miss storm;
each ends the attempt's model calls with a named reason, over HTTP through the real gateway
and with the real harnesses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from agentc.gateway.breakers import fingerprint
from agentc.supervisor.loop.steps import ending_of, gateway_stop
from agentc.testing import harnesses
from tests.gateway import kit

MakeStack = Any
TOOLS = [{"name": "Bash", "input_schema": {}}]


def _step(n: int, result: str = "cat: missing.txt: No such file or directory") -> dict[str, Any]:
    """A Messages body whose last step is one Bash call and its result (ids differ each time)."""
    return {
        "model": "claude-sonnet-5",
        "max_tokens": 1024,
        "stream": True,
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "Fix it."},
            {"role": "assistant", "content": [
                {"type": "text", "text": f"Attempt {n}."},
                {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
                 "input": {"command": "cat missing.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": result,
                 "cache_control": {"type": "ephemeral"}},
            ]},
        ],
    }  # fmt: skip


def _post(stack: Any, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{stack.url}/v1/messages", json=body, headers={"x-api-key": key}, timeout=30)


def test_the_fingerprint_is_the_last_step_without_what_changes_each_time() -> None:
    one, two = _step(1), _step(2)
    assert fingerprint("anthropic", one) == fingerprint("anthropic", two)  # ids, text, marks
    assert fingerprint("anthropic", one) != fingerprint("anthropic", _step(3, "other output"))
    assert fingerprint("anthropic", {"messages": [{"role": "user", "content": "hi"}]}) is None
    codex = [
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "exec_command",
         "arguments": '{"cmd": "cat x"}'},
        {"type": "function_call_output", "id": "fco_1", "call_id": "c1",
         "output": "Chunk ID: e351e7\nWall time: 0.0017 seconds\nProcess exited with code 1\n"},
    ]  # fmt: skip
    later = json.loads(json.dumps(codex).replace("e351e7", "a6a7a5").replace("0.0017", "0.0"))
    assert fingerprint("openai", {"input": codex}) == fingerprint("openai", {"input": later})


def test_the_same_step_again_is_refused_at_the_kth_time(make_stack: MakeStack) -> None:
    script = {"turns": [{"tool_calls": [{"tool": "run", "command": "cat missing.txt"}],
                         "repeat": 10}]}  # fmt: skip
    with make_stack(script, breakers={"same_request": 3}) as stack:
        key = stack.issue("s1", attempt="a1")
        codes = [_post(stack, key, _step(n)).status_code for n in range(3)]
        changed = _post(stack, key, _step(9, "something new"))
        again = stack.issue("s2", attempt="a1", generation=2)
        later = _post(stack, again, _step(10, "newer still"))
        other = _post(stack, stack.issue("s3", attempt="a2"), _step(0))
        status = stack.gateway.registry.status("s1")
        served = len(stack.provider.requests)
    assert codes == [200, 200, 402]
    # The attempt's calls end there: a new step, a new launch of the attempt, all refused.
    assert changed.status_code == later.status_code == 402
    error = changed.json()["error"]
    assert error["type"] == "billing_error"
    assert (
        "loop breaker same_request: the same tool calls with the same results 3 times"
        in (error["message"])
    )
    assert other.status_code == 200 and served == 3
    assert status["stop"]["kind"] == "breaker" and status["stop"]["name"] == "same_request"
    lines = [x for x in stack.log_lines() if x["outcome"] == "refused_breaker"]
    assert [x["breaker"] for x in lines] == ["same_request"] * 3
    assert stack.ledger_rows()[-1]["status"] == 200  # a breaker's refusal costs no row


def test_calls_that_use_no_tool_trip_the_no_progress_breaker(make_stack: MakeStack) -> None:
    script = {"turns": [{"text": "Let me think.", "repeat": 10}]}
    with make_stack(script, breakers={"no_progress": 3, "same_request": 0}) as stack:
        key = stack.issue("s1", attempt="a1")
        side = dict(_step(0), tools=[])  # a side call declares no tools: not counted
        codes = [_post(stack, key, b).status_code for b in (_step(1), side, _step(2), _step(3))]
        refused = _post(stack, key, _step(4))
        status = stack.gateway.registry.status("s1")
    assert codes == [200, 200, 200, 200]
    assert refused.status_code == 402
    assert "no_progress: 3 model calls in a row used no tool" in refused.json()["error"]["message"]
    assert status["stop"]["name"] == "no_progress"


def test_a_tool_call_resets_the_no_progress_count(make_stack: MakeStack) -> None:
    text = {"text": "Hmm."}
    tool = {"tool_calls": [{"tool": "run", "command": "ls"}]}
    script = {"turns": [text, text, tool, text, text, tool, text]}
    with make_stack(script, breakers={"no_progress": 3, "same_request": 0}) as stack:
        key = stack.issue("s1", attempt="a1")
        codes = [_post(stack, key, _step(n)).status_code for n in range(7)]
    assert codes == [200] * 7


def test_a_cache_miss_storm_after_the_cache_was_read(make_stack: MakeStack) -> None:
    hit = {"input_tokens": 100, "cache_read_input_tokens": 9000, "output_tokens": 10}
    miss = {"input_tokens": 9000, "cache_creation_input_tokens": 100, "output_tokens": 10}
    small = {"input_tokens": 500, "output_tokens": 10}  # below the minimum: not counted
    turns = [{"text": "x", "usage": u} for u in (miss, miss, hit, miss, small, miss, miss)]
    limits = {"cache_storm_calls": 3, "no_progress": 0, "same_request": 0}
    with make_stack({"turns": turns}, breakers=limits) as stack:
        key = stack.issue("s1", attempt="a1")
        codes = [_post(stack, key, _step(n)).status_code for n in range(7)]
        refused = _post(stack, key, _step(8))
    # Misses before the cache was ever read do not count; a small prompt neither counts nor
    # breaks the run; the third miss in a row after a hit trips it.
    assert codes == [200] * 7
    assert refused.status_code == 402
    message = refused.json()["error"]["message"]
    assert "cache_storm: 3 calls in a row read less than 20% of their prompt" in message


def test_breakers_set_to_zero_never_trip(make_stack: MakeStack) -> None:
    script = {"turns": [{"text": "x", "repeat": 8}]}
    limits = {"same_request": 0, "no_progress": 0, "cache_storm_calls": 0}
    with make_stack(script, breakers=limits) as stack:
        key = stack.issue("s1", attempt="a1")
        codes = [_post(stack, key, _step(1)).status_code for _ in range(8)]
    assert codes == [200] * 8


def test_claude_stuck_on_one_failing_command_is_stopped(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("claude")
    script = {"turns": [{"tool_calls": [{"tool": "run", "command": "cat missing.txt"}],
                         "repeat": 20}]}  # fmt: skip
    with make_stack(script) as stack:  # the defaults
        key = stack.issue("s-stuck", attempt="a-stuck")
        env = harnesses.claude_env(tmp_path / "home", stack.url, key)
        result = harnesses.run(harnesses.claude_argv("Fix it.", model="claude-sonnet-5"), env, work)
        main = stack.provider.main_requests()
        status = stack.gateway.registry.status("s-stuck")
    final = result.of_type("result")[-1]
    assert final["is_error"] is True
    assert "loop breaker same_request" in final["result"]
    same = stack.gateway.config.breakers.same_request
    assert len(main) == same  # the first call, then same - 1 repeats of the step; not the next
    assert status["stop"]["name"] == "same_request"


def test_codex_stuck_on_one_failing_command_is_stopped(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("codex")
    script = {"turns": [{"tool_calls": [{"tool": "run", "command": "cat missing.txt"}],
                         "repeat": 20}]}  # fmt: skip
    with make_stack(script) as stack:
        key = stack.issue("s-codex", attempt="a-codex", upstream="codex")
        env = harnesses.codex_env(tmp_path / "home", stack.url, key)
        result = harnesses.run(harnesses.codex_argv("Fix it."), env, work)
        main = stack.provider.main_requests()
    failed = result.of_type("turn.failed")
    assert result.returncode == 1
    assert failed and "loop breaker same_request" in failed[-1]["error"]["message"]
    assert len(main) == stack.gateway.config.breakers.same_request


def test_the_attempts_ending_names_what_ended_its_calls() -> None:
    stop = {"kind": "breaker", "name": "no_progress", "reason": "loop breaker no_progress: x"}
    said = gateway_stop({"stop": stop})
    assert said == "breaker no_progress: loop breaker no_progress: x"
    assert gateway_stop({"stop": None}) is None and gateway_stop({}) is None
    exited = "the launch exited with code 1"
    ending = ending_of("active", stopped=None, at_limit=False, rate_limited=False,
                       exited=exited, gateway_stop=said)  # fmt: skip
    assert ending.kind == "limit_hit" and ending.why.startswith("the model gateway ended its calls")
    submitted = ending_of("submitted", stopped=None, at_limit=False, rate_limited=False,
                          exited=exited, gateway_stop=said)  # fmt: skip
    assert submitted.kind == "submitted"  # the work was handed in: that is how it ended
