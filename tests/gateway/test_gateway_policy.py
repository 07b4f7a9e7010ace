"""The model policy at the gateway: calls outside it refused before they reach the provider,
in each API's error shape (issue 30); over HTTP through the real gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentc.core.model_policy import ModelPolicy
from agentc.files.launchlog import read_log
from agentc.gateway.policy import top_level, with_limit
from agentc.testing.gateway import ControlClient, ThreadedGateway

MakeStack = Any
TOOLS = [{"name": "Bash", "input_schema": {}}]
ANTHROPIC = {"model": "claude-sonnet-5", "max_tokens": 4096, "stream": True, "tools": TOOLS}
OPENAI = {"model": "gpt-5", "stream": True, "tools": [{"type": "function", "name": "x"}]}


def _post(stack: Any, key: str, body: dict[str, Any] | bytes, path: str = "/v1/messages") -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"x-api-key": key, "content-type": "application/json"}
    return httpx.post(f"{stack.url}{path}", content=content, headers=headers, timeout=30)


def test_a_model_outside_the_policy_is_refused_in_each_api_shape(make_stack: MakeStack) -> None:
    policy = ModelPolicy(allowed_models=("claude-haiku-*", "gpt-5-mini"))
    with make_stack({"after": {"text": "ok"}}) as stack:
        claude = stack.issue("s-claude", attempt="a-claude", policy=policy)
        codex = stack.issue("s-codex", attempt="a-codex", upstream="codex", policy=policy)
        refused_a = _post(stack, claude, ANTHROPIC)
        refused_o = _post(stack, codex, OPENAI, "/v1/responses")
        allowed = _post(stack, claude, dict(ANTHROPIC, model="claude-haiku-4-5"))
        forwarded = [r.body["model"] for r in stack.provider.requests]
    assert refused_a.status_code == 400
    assert refused_a.json()["type"] == "error"
    assert refused_a.json()["error"]["type"] == "invalid_request_error"
    message = refused_a.json()["error"]["message"]
    assert "'claude-sonnet-5' is not allowed by the model policy" in message
    assert "claude-haiku-*, gpt-5-mini" in message
    assert refused_o.status_code == 400
    error = refused_o.json()["error"]
    assert error["type"] == error["code"] == "invalid_request_error"
    assert "'gpt-5' is not allowed" in error["message"]
    assert allowed.status_code == 200
    assert forwarded == ["claude-haiku-4-5"]  # nothing refused reached the provider
    refusals = [x for x in stack.log_lines() if x["outcome"] == "refused_policy"]
    assert [(x["status"], x["policy"]) for x in refusals] == [(400, "model")] * 2
    assert stack.ledger_rows()[0]["model"] == "claude-haiku-4-5"  # only the forwarded call


def test_output_tokens_above_the_policy_are_refused_and_a_missing_limit_is_added(
    make_stack: MakeStack,
) -> None:
    policy = ModelPolicy(max_output_tokens=2048)
    with make_stack({"after": {"text": "ok"}}) as stack:
        claude = stack.issue("s-claude", attempt="a-claude", policy=policy)
        codex = stack.issue("s-codex", attempt="a-codex", upstream="codex", policy=policy)
        too_many = _post(stack, claude, ANTHROPIC)
        at_limit = _post(stack, claude, dict(ANTHROPIC, max_tokens=2048))
        too_many_o = _post(stack, codex, dict(OPENAI, max_output_tokens=4096), "/v1/responses")
        unnamed = _post(stack, codex, OPENAI, "/v1/responses")
        explicit_null = _post(stack, codex, dict(OPENAI, max_output_tokens=None), "/v1/responses")
        bodies = [r.body for r in stack.provider.requests]
    assert too_many.status_code == 400
    assert too_many.json()["error"]["message"] == (
        "agentc: max_tokens: 4096 > 2048, the most the model policy allows per call"
    )
    assert too_many_o.status_code == 400
    assert "max_output_tokens: 4096 > 2048" in too_many_o.json()["error"]["message"]
    assert explicit_null.status_code == 400
    assert at_limit.status_code == unnamed.status_code == 200
    # Codex names no limit: the gateway adds the policy's, and changes nothing else.
    assert bodies == [dict(ANTHROPIC, max_tokens=2048), dict(OPENAI, max_output_tokens=2048)]


def test_a_body_read_two_ways_is_refused(make_stack: MakeStack) -> None:
    """A key twice: the gateway would check one value and a provider might use the other."""
    policy = ModelPolicy(allowed_models=("claude-haiku-*",))
    twice = (
        b'{"model": "claude-sonnet-5", "max_tokens": 10, "tools": [], "model": "claude-haiku-4-5"}'
    )
    with make_stack({"after": {"text": "ok"}}) as stack:
        key = stack.issue(policy=policy)
        answers = [
            _post(stack, key, twice),
            _post(stack, key, b'["claude-haiku-4-5"]'),
            _post(stack, key, b'{"model": "claude-haiku-4-5"} {"model": "x"}'),
            _post(stack, key, b'{"model": "claude-haiku-4-5", "max_tokens": NaN}'),
            _post(stack, key, b"\xff\xfe{}"),
        ]
        served = len(stack.provider.requests)
    assert [a.status_code for a in answers] == [400] * 5
    assert "the key 'model' twice" in answers[0].json()["error"]["message"]
    assert served == 0


def test_turns_per_attempt_then_nothing(make_stack: MakeStack) -> None:
    policy = ModelPolicy(max_turns=2)
    with make_stack({"after": {"text": "ok"}}) as stack:
        first = stack.issue("s1", attempt="a1", policy=policy)
        answers = [_post(stack, first, ANTHROPIC).status_code for _ in range(2)]
        third = _post(stack, first, ANTHROPIC)
        models = httpx.get(f"{stack.url}/v1/models", headers={"x-api-key": first})
        # The turns are the attempt's: a new launch of it (a new generation) has none left.
        again = stack.issue("s2", attempt="a1", generation=2, policy=policy)
        fourth = _post(stack, again, ANTHROPIC)
        other = _post(stack, stack.issue("s3", attempt="a2", policy=policy), ANTHROPIC)
        status = stack.gateway.registry.status("s1")
        served = len(stack.provider.requests)
    assert answers == [200, 200]
    assert third.status_code == fourth.status_code == models.status_code == 402
    assert third.json()["error"]["type"] == "billing_error"
    assert "made its 2 model turns (max_turns)" in third.json()["error"]["message"]
    assert other.status_code == 200
    assert served == 3
    assert status["stop"] == {
        "kind": "policy",
        "name": "max_turns",
        "reason": "the attempt has made its 2 model turns (max_turns)",
    }


def test_dollars_per_attempt_are_a_cap(make_stack: MakeStack) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 0}  # $0.002 at $2/M (claude-sonnet-5)
    script = {"turns": [{"text": "ok", "usage": usage, "repeat": 5}]}
    with make_stack(script) as stack:
        key = stack.issue("s1", attempt="a1", policy=ModelPolicy(max_usd=0.003))
        codes = [_post(stack, key, ANTHROPIC).status_code for _ in range(3)]
        again = stack.issue("s2", attempt="a1", generation=2, policy=ModelPolicy(max_usd=0.003))
        later = _post(stack, again, ANTHROPIC)
        status = stack.gateway.registry.status("s1")
    assert codes == [200, 200, 402]
    assert later.status_code == 402
    assert "the attempt cost cap is reached" in later.json()["error"]["message"]
    assert status["cap"] == "attempt"
    assert status["stop"]["kind"] == "cap" and status["stop"]["name"] == "attempt"
    assert [r.get("refused_cap") for r in stack.ledger_rows()][-2:] == ["attempt", "attempt"]


def test_turns_survive_a_restart_of_the_gateway(make_stack: MakeStack) -> None:
    with make_stack({"after": {"text": "ok"}}) as stack:
        key = stack.issue("s1", attempt="a1", policy=ModelPolicy(max_turns=2))
        assert _post(stack, key, ANTHROPIC).status_code == 200
        config = stack.config
    from agentc.gateway.app import Gateway

    reborn = Gateway(config)  # reads the ledger again
    assert reborn.ledger.turns("a1") == 1


def test_the_control_socket_carries_the_policy(tmp_path: Path, make_stack: MakeStack) -> None:
    with make_stack({"after": {"text": "ok"}}) as stack:
        stack.server.stop()
        with ThreadedGateway(stack.gateway, control=True) as server:
            control = ControlClient(stack.config.control_socket)
            wire = {"allowed_models": ["claude-haiku-*"], "max_output_tokens": 100}
            key = control.issue(session="s1", attempt="a1", generation=1, upstream="claude",
                                policy=wire)  # fmt: skip
            with pytest.raises(Exception, match="policy: max_turns: a whole number"):
                control.issue(session="s2", attempt="a2", generation=1, upstream="claude",
                              policy={"max_turns": 0})  # fmt: skip
            refused = httpx.post(
                f"{server.url}/v1/messages", json=ANTHROPIC, headers={"x-api-key": key}
            )
    assert refused.status_code == 400
    grant = stack.gateway.registry.check(key)
    assert grant.policy == ModelPolicy(allowed_models=("claude-haiku-*",), max_output_tokens=100)


def test_top_level_members_and_the_added_limit() -> None:
    assert top_level(b' { "a" : 1 , "b":{"a":2,"a":3} } ') == {"a": 1, "b": {"a": 3}}
    assert top_level(b"{}") == {}
    for bad in (b"", b"{", b'{"a":1,}', b'{"a" 1}', b'{"a":1} x', b"[1]", b'{"a":1,"a":2}'):
        with pytest.raises(ValueError):
            top_level(bad)
    assert json.loads(with_limit(b' {"model": "m"}', "max_output_tokens", 5)) == {
        "max_output_tokens": 5,
        "model": "m",
    }
    assert json.loads(with_limit(b"{ }", "max_tokens", 7)) == {"max_tokens": 7}


def test_every_call_goes_to_its_launch_event_log(tmp_path: Path, make_stack: MakeStack) -> None:
    logs = tmp_path / "launch-logs"
    policy = ModelPolicy(allowed_models=("claude-*",))
    with make_stack({"after": {"text": "ok"}}, launch_logs=logs) as stack:
        key = stack.issue("launch-a", policy=policy)
        assert _post(stack, key, ANTHROPIC).status_code == 200
        assert _post(stack, key, dict(ANTHROPIC, model="gpt-5")).status_code == 400
        other = stack.issue("launch-b", attempt="a2")
        assert _post(stack, other, ANTHROPIC).status_code == 200
    read = read_log(logs, "launch-a")
    assert read.problems == []
    assert [(e["source"], e["event"], e["outcome"]) for e in read.events] == [
        ("gateway", "model_call", "ok"),
        ("gateway", "model_call", "refused_policy"),
    ]
    first, refused = read.events
    assert first["model"] == "claude-sonnet-5" and first["usd"] is not None
    assert first["input_tokens"] is not None and first["status"] == 200
    assert refused["policy"] == "model" and "not allowed" in refused["reason"]
    assert len(read_log(logs, "launch-b").events) == 1
    assert (logs.stat().st_mode & 0o777) == 0o700
