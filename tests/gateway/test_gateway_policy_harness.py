"""The real harness binaries meeting the model policy at the gateway (issue 30): each ends
its turn with the gateway's words, and nothing outside the policy reaches the provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentc.core.model_policy import ModelPolicy
from agentc.testing import harnesses
from tests.gateway import kit

MakeStack = Any


def _claude(tmp_path: Path, url: str, key: str, work: Path) -> harnesses.HarnessRun:
    env = harnesses.claude_env(tmp_path / "home", url, key)  # its own retries, as launched
    argv = harnesses.claude_argv("Do the task.", model="claude-sonnet-5")
    return harnesses.run(argv, env, work)


def test_claude_shows_a_model_the_policy_does_not_allow(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("claude")
    policy = ModelPolicy(allowed_models=("claude-haiku-*",))
    with make_stack({"after": {"text": "never"}}) as stack:
        key = stack.issue("s-model", task="t1", policy=policy)
        result = _claude(tmp_path, stack.url, key, work)
        served = len(stack.provider.requests)
    final = result.of_type("result")[-1]
    assert final["is_error"] is True
    assert final["api_error_status"] == 400
    assert "'claude-sonnet-5' is not allowed by the model policy" in final["result"]
    assert served == 0
    # Claude Code tries again with fewer beta features after a 400; each try is refused.
    lines = stack.log_lines()
    assert lines and {x["outcome"] for x in lines} == {"refused_policy"}


def test_claude_ends_when_its_turns_are_used(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("claude")
    script = {"turns": [{"tool_calls": [{"tool": "run", "command": "true"}], "repeat": 5}]}
    with make_stack(script) as stack:
        key = stack.issue("s-turns", task="t1", policy=ModelPolicy(max_turns=2))
        result = _claude(tmp_path, stack.url, key, work)
        main = stack.provider.main_requests()
    final = result.of_type("result")[-1]
    assert final["is_error"] is True
    assert "made its 2 model turns (max_turns)" in final["result"]
    assert len(main) == 2
    assert stack.gateway.registry.status("s-turns")["stop"]["name"] == "max_turns"


def test_codex_fails_its_turn_at_the_policy(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    kit.needs("codex")
    script = {"turns": [{"tool_calls": [{"tool": "run", "command": "true"}], "repeat": 5}]}
    policy = ModelPolicy(max_turns=1, max_output_tokens=3000)
    with make_stack(script) as stack:
        key = stack.issue("s-codex", upstream="codex", policy=policy)
        env = harnesses.codex_env(tmp_path / "home", stack.url, key)
        result = harnesses.run(harnesses.codex_argv("Loop."), env, work)
        main = stack.provider.main_requests()
    assert result.returncode == 1
    failed = result.of_type("turn.failed")
    assert failed and "model turns (max_turns)" in failed[-1]["error"]["message"]
    assert len(main) == 1
    # Codex names no output limit: the one call it made went out with the policy's.
    assert main[0].body["max_output_tokens"] == 3000


def test_claude_and_pi_are_told_the_policy_output_limit(
    tmp_path: Path, work: Path, make_stack: MakeStack
) -> None:
    """Launched with the policy, each asks within it (their defaults are 64,000 and 16,384,
    which the gateway would refuse)."""
    kit.needs("claude")
    kit.needs("pi")
    policy = ModelPolicy(max_output_tokens=2048)
    with make_stack({"after": {"text": "Done."}}) as stack:
        key = stack.issue("s-claude", attempt="a1", policy=policy)
        env = harnesses.claude_env(tmp_path / "h1", stack.url, key, max_output_tokens=2048)
        argv = harnesses.claude_argv("Do it.", model="claude-sonnet-5")
        claude = harnesses.run(argv, env, work)
        key = stack.issue("s-pi", attempt="a2", policy=policy)
        env = harnesses.pi_env(tmp_path / "h2", stack.url, key, max_output_tokens=2048)
        pi = harnesses.run(harnesses.pi_argv("Do it."), env, work)
        asked = {r.body["max_tokens"] for r in stack.provider.requests}
    assert claude.returncode == 0, claude.stderr
    assert pi.returncode == 0, pi.stderr
    assert asked == {2048}
    assert {x["outcome"] for x in stack.log_lines()} == {"ok"}
