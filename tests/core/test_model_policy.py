"""The model policy's one rule: patterns, validation, the effective policy, its wire form."""

from __future__ import annotations

import pytest

from agentc.core import model_policy as mp
from agentc.core.model_policy import ModelPolicy


@pytest.mark.parametrize(
    ("patterns", "model", "allowed"),
    [
        (None, "anything", True),
        ((), "claude-sonnet-5", False),
        (("claude-haiku-*",), "claude-haiku-4-5", True),
        (("claude-haiku-*",), "claude-haiku-", True),
        (("claude-haiku-*",), "xclaude-haiku-4-5", False),  # the whole name
        (("claude-haiku-*",), "Claude-haiku-4-5", False),  # case-sensitive
        (("claude-sonnet-5[1m]",), "claude-sonnet-5[1m]", True),  # [1m] is literal
        (("claude-sonnet-5[1m]",), "claude-sonnet-51", False),
        (("gpt-5.?",), "gpt-5.1", False),  # '?' is not a wildcard (and not allowed)
        (("*-codex", "gpt-5"), "gpt-5-codex", True),
        (("*",), "whatever-model", True),
        (("a.b",), "axb", False),  # '.' is literal
    ],
)
def test_model_patterns(patterns: tuple[str, ...] | None, model: str, allowed: bool) -> None:
    assert mp.model_allowed(patterns, model) is allowed


def test_problems_name_each_field() -> None:
    assert mp.problems({}) == []
    assert mp.problems(mp.to_wire(ModelPolicy(("claude-*",), 8192, 40, 2.5))) == []
    found = mp.problems(
        {
            "allowed_models": ["ok-*", "bad model", ""],
            "max_output_tokens": 0,
            "max_turns": True,
            "max_usd": float("nan"),
            "extra": 1,
        }
    )
    assert found[0] == "extra: not a policy field"
    assert any("'bad model'" in f for f in found)
    assert any(f.startswith("allowed_models: a model pattern") for f in found)
    assert any(f.startswith("max_output_tokens:") for f in found)
    assert any(f.startswith("max_turns:") for f in found)
    assert any(f.startswith("max_usd:") for f in found)
    assert mp.problems({"allowed_models": ["m"] * 51})[0].startswith("allowed_models: a list")
    assert mp.problems({"max_usd": 0})[0].startswith("max_usd:")


def test_the_wire_form_round_trips_and_refuses_bad_input() -> None:
    policy = ModelPolicy(("claude-*",), 8192, 40, 2.5)
    assert mp.from_wire(mp.to_wire(policy)) == policy
    assert mp.from_wire(None) == ModelPolicy()
    assert mp.from_wire({"max_usd": 3}).max_usd == 3.0
    with pytest.raises(ValueError, match="max_turns"):
        mp.from_wire({"max_turns": -1})
    with pytest.raises(ValueError, match="an object"):
        mp.from_wire(["claude-*"])


def test_the_task_sets_what_it_sets_and_the_project_the_rest() -> None:
    project = ModelPolicy(("claude-*",), 8192, 40, None)
    task = ModelPolicy(None, 2048, None, 5.0)
    assert mp.effective(project, task) == ModelPolicy(("claude-*",), 2048, 40, 5.0)
    assert mp.sources(project, task) == {
        "allowed_models": "project",
        "max_output_tokens": "task",
        "max_turns": "project",
        "max_usd": "task",
    }
    assert mp.effective(ModelPolicy(), ModelPolicy()).empty
    assert mp.sources(ModelPolicy(), ModelPolicy())["max_turns"] is None
    # An empty list at the task is set: no model at all, not the project's list.
    assert mp.effective(project, ModelPolicy(allowed_models=())).allowed_models == ()


def test_refusals_in_words() -> None:
    policy = ModelPolicy(("claude-haiku-*",), 1000)
    assert mp.model_refusal(policy, "claude-haiku-4-5") is None
    assert "not allowed" in (mp.model_refusal(policy, "claude-sonnet-5") or "")
    assert "names no model" in (mp.model_refusal(policy, None) or "")
    assert mp.model_refusal(ModelPolicy(), None) is None
    assert mp.output_refusal(policy, "max_tokens", 1000) is None
    assert mp.output_refusal(policy, "max_tokens", None) is None
    assert (mp.output_refusal(policy, "max_tokens", 1001) or "").startswith("max_tokens: 1001 >")
    assert "whole number" in (mp.output_refusal(policy, "max_tokens", "9") or "")
    assert "whole number" in (mp.output_refusal(policy, "max_tokens", True) or "")
