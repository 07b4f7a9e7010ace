"""The model policy: which models a task's launches may call and how much (decision D47).

One home for the rule that decides. People set a policy per project and per task in the
coordinator (``agentc.service.work.model_policy`` validates with :func:`problems`); the loop
reads the task's effective policy (:func:`effective`: the task's value where it sets one,
else the project's) after its claim and hands it to the model gateway with the launch's
sentinel (the control socket carries :func:`to_wire`, read back with :func:`from_wire`); the
gateway refuses a call outside it before forwarding (:func:`model_refusal`,
:func:`output_refusal`) and counts the attempt's turns and dollars against it.

Model patterns: ``*`` stands for any run of characters (``claude-haiku-*``), everything else
is literal (``[1m]`` in a model name is not a character class) and the match is the whole name,
case-sensitive, as providers name models. No pattern list means any model; an empty list
means none.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

PATTERNS_MAX = 50
PATTERN_MAX = 200
OUTPUT_TOKENS_MAX = 10_000_000
TURNS_MAX = 1_000_000
USD_MIN = 0.0001  # a hundredth of a cent
USD_MAX = 1_000_000.0
_PATTERN = re.compile(r"^[A-Za-z0-9._:@/\[\]*-]+$")
PATTERN_RULE = f"1-{PATTERN_MAX} of letters, digits, '._:@/[]-' and '*' (any characters)"
FIELDS = ("allowed_models", "max_output_tokens", "max_turns", "max_usd")


@dataclass(frozen=True)
class ModelPolicy:
    """One level's policy (a project's or a task's) or the effective one; None: not set."""

    allowed_models: tuple[str, ...] | None = None
    max_output_tokens: int | None = None  # per call (the request's max_tokens)
    max_turns: int | None = None  # model calls per attempt
    max_usd: float | None = None  # dollars per attempt (beside the gateway's caps)

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in FIELDS)

    @property
    def reads_body(self) -> bool:
        """Whether a call's body must be read to check it (its model or its output limit)."""
        return self.allowed_models is not None or self.max_output_tokens is not None


def pattern_problem(pattern: object) -> str | None:
    if not isinstance(pattern, str) or not 1 <= len(pattern) <= PATTERN_MAX:
        return f"a model pattern is {PATTERN_RULE}"
    if not _PATTERN.fullmatch(pattern):
        return f"model pattern {pattern!r}: {PATTERN_RULE}"
    return None


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def model_allowed(patterns: Sequence[str] | None, model: str) -> bool:
    """Whether ``model`` matches one of ``patterns`` (None: any model is allowed)."""
    if patterns is None:
        return True
    return any(_matcher(p).fullmatch(model) for p in patterns)


def problems(policy: Mapping[str, Any]) -> list[str]:
    """What is wrong with a policy given as a mapping (unknown keys, types, ranges), in words."""
    found = [f"{key}: not a policy field" for key in policy if key not in FIELDS]
    models = policy.get("allowed_models")
    if models is not None:
        if not isinstance(models, list | tuple) or len(models) > PATTERNS_MAX:
            found.append(f"allowed_models: a list of at most {PATTERNS_MAX} model patterns")
        else:
            found += [f"allowed_models: {p}" for m in models if (p := pattern_problem(m))]
    for key, most in (("max_output_tokens", OUTPUT_TOKENS_MAX), ("max_turns", TURNS_MAX)):
        value = policy.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most
        ):
            found.append(f"{key}: a whole number from 1 to {most:,}, or null (no limit)")
    usd = policy.get("max_usd")
    if usd is not None and (
        isinstance(usd, bool)
        or not isinstance(usd, int | float)
        or not math.isfinite(usd)
        or not USD_MIN <= usd <= USD_MAX
    ):
        found.append(f"max_usd: dollars from {USD_MIN} to {USD_MAX:,.0f}, or null (no limit)")
    return found


def from_wire(data: object) -> ModelPolicy:
    """The policy a mapping gives (the control socket's ``policy``); ValueError if invalid."""
    if data is None:
        return ModelPolicy()
    if not isinstance(data, Mapping):
        raise ValueError("a model policy is an object")
    found = problems(data)
    if found:
        raise ValueError("; ".join(found))
    models = data.get("allowed_models")
    usd = data.get("max_usd")
    return ModelPolicy(
        allowed_models=tuple(models) if models is not None else None,
        max_output_tokens=data.get("max_output_tokens"),
        max_turns=data.get("max_turns"),
        max_usd=float(usd) if usd is not None else None,
    )


def to_wire(policy: ModelPolicy) -> dict[str, Any]:
    """The policy as JSON (every field, null where not set)."""
    models = policy.allowed_models
    return {
        "allowed_models": list(models) if models is not None else None,
        "max_output_tokens": policy.max_output_tokens,
        "max_turns": policy.max_turns,
        "max_usd": policy.max_usd,
    }


def effective(project: ModelPolicy, task: ModelPolicy) -> ModelPolicy:
    """The task's value of each field where it sets one, else the project's."""
    chosen = {
        name: getattr(task, name) if getattr(task, name) is not None else getattr(project, name)
        for name in FIELDS
    }
    return replace(ModelPolicy(), **chosen)


def sources(project: ModelPolicy, task: ModelPolicy) -> dict[str, str | None]:
    """Where each effective field comes from: ``task``, ``project`` or None (no limit)."""
    out: dict[str, str | None] = {}
    for f in fields(ModelPolicy):
        if getattr(task, f.name) is not None:
            out[f.name] = "task"
        else:
            out[f.name] = "project" if getattr(project, f.name) is not None else None
    return out


def patterns_text(patterns: Sequence[str]) -> str:
    return ", ".join(patterns) if patterns else "none"


def model_refusal(policy: ModelPolicy, model: object) -> str | None:
    """Why a call naming ``model`` is outside the policy, or None."""
    if policy.allowed_models is None:
        return None
    if not isinstance(model, str) or not model:
        return "the request names no model, and the model policy allows only some"
    if model_allowed(policy.allowed_models, model):
        return None
    allowed = patterns_text(policy.allowed_models)
    return (
        f"the model {model[:PATTERN_MAX]!r} is not allowed by the model policy (allowed: {allowed})"
    )


def output_refusal(policy: ModelPolicy, field: str, asked: object) -> str | None:
    """Why a call asking for ``asked`` output tokens (its ``field``) is outside the policy."""
    most = policy.max_output_tokens
    if most is None or asked is None:
        return None
    if isinstance(asked, bool) or not isinstance(asked, int):
        return f"{field}: not a whole number"
    if asked > most:
        return f"{field}: {asked} > {most}, the most the model policy allows per call"
    return None
