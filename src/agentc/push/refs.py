"""The refs the helper publishes to, derived from its own task and launch ids only."""

from __future__ import annotations

import re

from agentc.core.errors import ConfigError

CANDIDATES = "refs/agent-coordinator/candidates"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_id(value: str, what: str) -> str:
    """``value`` when it is a safe ref component, else :class:`ConfigError`.

    Safe: 1 to 128 characters of ``A-Z a-z 0-9 _ . -``, starting with a letter or digit, with no
    ``..`` and not ending in ``.`` or ``.lock`` (so git accepts it as one ref component).
    """
    if not _ID.fullmatch(value) or ".." in value or value.endswith((".", ".lock")):
        raise ConfigError(
            f"{what} {value!r} is not a safe id (1-128 of A-Z a-z 0-9 _ . -, starting with a "
            "letter or digit, no '..', not ending in '.' or '.lock')"
        )
    return value


def candidate_ref(task: str, launch: str) -> str:
    """The launch's one candidate ref: created once, never moved."""
    return f"{CANDIDATES}/{check_id(task, 'task')}/{check_id(launch, 'launch')}"


def wip_ref(task: str, launch: str, revision: str) -> str:
    """The create-only WIP checkpoint ref of ``revision``."""
    return f"{CANDIDATES}/wip/{check_id(task, 'task')}/{check_id(launch, 'launch')}/{revision}"
