"""The refs the helper publishes to, derived from its own task and launch ids only."""

from __future__ import annotations

from agentc.core.rules import check_id

CANDIDATES = "refs/agent-coordinator/candidates"


def candidate_ref(task: str, launch: str) -> str:
    """The launch's one candidate ref: created once, never moved."""
    return f"{CANDIDATES}/{check_id('task', task)}/{check_id('launch', launch)}"


def wip_ref(task: str, launch: str, revision: str) -> str:
    """The create-only WIP checkpoint ref of ``revision``."""
    return f"{CANDIDATES}/wip/{check_id('task', task)}/{check_id('launch', launch)}/{revision}"
