"""Which agent ``agentc up`` runs, and whether it can: ``--harness``.

``example`` is the bundled example agent (no model). ``command:<path>`` is any executable.
``claude``, ``codex`` and ``pi`` are the real harnesses: each must be installed (on ``PATH``),
and a model credential must be found on this machine (an API key in the environment, or the
harness's own sign-in file); the credential is copied to the model gateway's private directory
and never reaches a launch, which holds only a per-launch sentinel (docs/gateway.md).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import ConfigError

REAL = ("claude", "codex", "pi")
INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "pi": "npm install -g @mariozechner/pi-coding-agent",
}
# The gateway upstream each harness calls, and that upstream's API.
UPSTREAM = {
    "claude": ("claude", "anthropic"),
    "pi": ("claude", "anthropic"),
    "codex": ("codex", "openai"),
}
BASE_URL = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com"}
BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


@dataclass(frozen=True)
class ModelAccess:
    """A real harness's credential and where its upstream is."""

    harness: str
    upstream: str
    api: str
    base_url: str
    secret: str = ""  # never printed
    source: str = ""

    def __repr__(self) -> str:
        return f"ModelAccess({self.harness}, {self.upstream}, from {self.source})"


def _home() -> Path:
    return Path(os.environ.get("HOME") or "/nonexistent")


def _claude_secret() -> tuple[str, str] | None:
    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"):
        if os.environ.get(name):
            return os.environ[name], f"${name}"
    path = _home() / ".claude/.credentials.json"
    try:
        token = json.loads(path.read_text())["claudeAiOauth"]["accessToken"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (token, str(path)) if isinstance(token, str) and token else None


def _openai_secret() -> tuple[str, str] | None:
    if os.environ.get("OPENAI_API_KEY"):
        return os.environ["OPENAI_API_KEY"], "$OPENAI_API_KEY"
    path = _home() / ".codex/auth.json"
    try:
        key = json.loads(path.read_text()).get("OPENAI_API_KEY")
    except (OSError, ValueError, AttributeError):
        return None
    return (key, str(path)) if isinstance(key, str) and key else None


def check_harness(harness: str) -> ModelAccess | None:
    """Refuse, saying what is missing, a harness that cannot run here; its model access."""
    if harness == "example":
        return None
    if harness.startswith("command:"):
        program = Path(harness.removeprefix("command:"))
        if not program.is_absolute() or not os.access(program, os.X_OK) or not program.is_file():
            raise ConfigError(
                f"--harness {harness}: {program} is not an executable file (an absolute path)"
            )
        return None
    if harness not in REAL:
        raise ConfigError(f"--harness {harness}: use example, claude, codex, pi or command:<path>")
    if shutil.which(harness) is None:
        raise ConfigError(
            f"--harness {harness}: `{harness}` is not installed (not on PATH); install it with "
            f"`{INSTALL[harness]}`, or run the bundled example agent (omit --harness)"
        )
    upstream, api = UPSTREAM[harness]
    found = _claude_secret() if api == "anthropic" else _openai_secret()
    if found is None:
        where = (
            "$ANTHROPIC_API_KEY, $CLAUDE_CODE_OAUTH_TOKEN or a `claude` sign-in (~/.claude)"
            if api == "anthropic"
            else "$OPENAI_API_KEY or a `codex login` with an API key (~/.codex/auth.json)"
        )
        raise ConfigError(
            f"--harness {harness}: no model credential found: set {where}. It goes to the model "
            "gateway on this machine, never into a launch"
        )
    base = os.environ.get(BASE_URL_ENV[api]) or BASE_URL[api]
    return ModelAccess(harness, upstream, api, base, found[0], found[1])
