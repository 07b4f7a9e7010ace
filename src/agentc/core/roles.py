"""The launch vocabulary, written once: the two roles (and their short names on disk), the
two modes a supervisor runs in.

A launch runs as ``implementer`` or ``reviewer``; code holds a role by that name only. The short
name (``impl``, ``rev``) is how the seed names the role's directory under the state root and
its account (``agentc-impl``), and how the gateway's ledger and logs record it: it is derived
here, with :func:`role_slug`, wherever a path or a record needs it. A supervisor runs in
``host`` mode (root, role accounts) or ``personal`` mode (one user). The harnesses are the
supervisor's (:mod:`agentc.supervisor.harness.registry`).
"""

from __future__ import annotations

import json
from typing import Literal

Role = Literal["implementer", "reviewer"]
ROLES: tuple[Role, ...] = ("implementer", "reviewer")
Mode = Literal["host", "personal"]
MODES: tuple[Mode, ...] = ("host", "personal")
_SLUGS: dict[str, str] = {"implementer": "impl", "reviewer": "rev"}


def role_slug(role: str) -> str:
    """The role's short name: its directory under the state root and its name in records."""
    return _SLUGS[role]


# Claude Code's tools a launch of each role (by its short name) may use without asking: nobody is
# there to answer. The sandbox, not these lists, is what confines them, and a reviewer's Bash
# runs in the candidate shell. Written into each role's protected ``claude-config/settings.json``
# by ``agentc up`` and ``agentc-host setup``.
CLAUDE_TOOLS: dict[str, list[str]] = {
    "impl": ["Bash", "Write", "Edit", "Read"],
    "rev": ["Bash", "Read"],
}


def claude_settings(slug: str) -> str:
    """The role's ``claude-config/settings.json`` (``slug``: ``impl`` or ``rev``)."""
    return json.dumps({"permissions": {"allow": CLAUDE_TOOLS[slug]}}, indent=2) + "\n"
