"""Fill a contract template and append the quoted data (pure: the caller reads the files)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from agentc.core.errors import AgentcError

MAX_CONTRACT_WORDS = 1500
MAX_INSTRUCTION_BYTES = 32 * 1024
INSTRUCTION_FILES = ("AGENTS.md", "CONTRIBUTING.md")

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
# Tags that quote data; inside data, any closing form of them is defused (any case, any spacing).
_QUOTE_TAGS = ("task-title", "task-data", "repository-instructions", "review-data")
_CLOSING = re.compile(r"</\s*(" + "|".join(_QUOTE_TAGS) + r")", re.IGNORECASE)


class ContractError(AgentcError, ValueError):
    """A contract cannot be rendered (a placeholder unfilled or unknown, or it is too long)."""


def _template(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _fill(name: str, values: Mapping[str, str]) -> str:
    text = _template(name)
    if len(text.split()) > MAX_CONTRACT_WORDS:
        raise ContractError(f"the {name} contract is longer than {MAX_CONTRACT_WORDS} words")
    wanted = set(_PLACEHOLDER.findall(text))
    if wanted != set(values):
        missing, extra = sorted(wanted - set(values)), sorted(set(values) - wanted)
        raise ContractError(f"{name}: placeholders missing {missing}, unknown {extra}")
    return _PLACEHOLDER.sub(lambda m: values[m[1]], text)


def quote_data(text: str) -> str:
    """Defuse each closing quote tag in ``text``: ``</task-title`` becomes ``<\\/task-title``."""
    return _CLOSING.sub(lambda m: "<\\/" + m[1], text)


def _title(title: str) -> str:
    return quote_data(" ".join(title.replace("\r", " ").replace("\n", " ").split()))


def _instructions(files: Mapping[str, bytes]) -> str:
    parts = []
    for name in INSTRUCTION_FILES:
        raw = files.get(name)
        if raw is None:
            continue
        text = raw[:MAX_INSTRUCTION_BYTES].decode("utf-8", "replace")
        cut = ' truncated="true"' if len(raw) > MAX_INSTRUCTION_BYTES else ""
        parts.append(
            f'\n<repository-instructions file="{name}"{cut}>\n'
            f"{quote_data(text)}\n</repository-instructions>\n"
        )
    return "".join(parts)


def implementer_prompt(
    *,
    project: str,
    task: Mapping[str, Any],
    session: str,
    attempt: str,
    generation: int,
    checkout: str,
    instructions: Mapping[str, bytes],
    feedback: Mapping[str, Any] | None = None,
) -> str:
    """The implementer's prompt: the contract, then the task and the repository's instructions.

    ``task`` is the coordinator's task (``id``, ``revision``, ``title``, ``description``,
    ``acceptance_criteria``); ``instructions`` maps an instruction file's name to its bytes at
    the cloned revision (absent files left out); ``feedback`` is what the reviews (or the
    integrator) said of the task's last submission, sent back (``supervisor.loop.feedback``).
    """
    contract = _fill(
        "implementer.md",
        {
            "project": project,
            "task_id": str(task["id"]),
            "task_revision": str(task["revision"]),
            "task_title": _title(str(task["title"])),
            "session": session,
            "attempt": attempt,
            "generation": str(generation),
            "checkout": checkout,
        },
    )
    data = {
        "description": task.get("description") or "",
        "acceptance_criteria": list(task.get("acceptance_criteria") or []),
    }
    if feedback:
        data["changes_requested"] = dict(feedback)
    body = json.dumps(data, indent=2, ensure_ascii=False)
    return (
        contract
        + f"\n<task-data>\n{quote_data(body)}\n</task-data>\n"
        + _instructions(instructions)
    )


def reviewer_prompt(
    *,
    project: str,
    title: str,
    base: str | None,
    candidate: str | None,
    criteria: Sequence[str],
    submission: Mapping[str, Any],
    instructions: Mapping[str, bytes],
    interdiff: Mapping[str, Any] | None = None,
    launch_log: Mapping[str, Any] | None = None,
) -> str:
    """The reviewer's prompt: the contract, the review data, the base's instruction files;
    ``interdiff``: what the candidate changes against an approved one sent back
    (``supervisor.loop.interdiff``).

    ``launch_log`` is the summary of the implementer launch's event log (the review claim's
    ``launch_log``; None when not recorded). In the review data every ``<`` is escaped as
    ``\\u003c``, so nothing in it reads as a tag.
    """
    contract = _fill(
        "reviewer.md",
        {
            "project": project,
            "task_title": _title(title),
            "base": base or "HEAD",
            "candidate": candidate or "HEAD",
        },
    )
    review: dict[str, Any] = {
        "acceptance_criteria": list(criteria),
        "submission": dict(submission),
        "implementer_launch": dict(launch_log) if launch_log else None,
    }
    if interdiff:
        review["interdiff"] = dict(interdiff)
    data = json.dumps(review, indent=2, ensure_ascii=False).replace("<", "\\u003c")
    return contract + f"\n<review-data>\n{data}\n</review-data>\n" + _instructions(instructions)
