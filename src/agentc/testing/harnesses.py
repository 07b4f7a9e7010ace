"""Run the real harness binaries (Claude Code, Codex, Pi) offline against a local endpoint.

Each ``*_env`` function builds a throwaway home for one harness that points it at a local base
URL with a given key and keeps it quiet (no auto-update, telemetry or version checks), using
the launch layer's own per-harness configuration (``agentc.supervisor.harness.env``), and
returns the complete environment: nothing is inherited from the caller, so no credential of
the calling process can leak into a harness. ``run`` starts the binary and parses its JSON
event stream.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.files.procs import run_check, system_env
from agentc.supervisor.harness import claude, codex, pi, registry
from agentc.supervisor.harness import env as harness_env

# The pinned binaries live in tools/harnesses (installed by scripts/setup --dev).
_REPO = Path(__file__).resolve().parents[3]
BIN_DIR = Path(
    os.environ.get("AGENTC_HARNESS_BIN_DIR", _REPO / "tools/harnesses/node_modules/.bin")
)

_BASE_ENV = {
    **system_env(),
    "TERM": "dumb",
    "NO_COLOR": "1",
    # No updater, telemetry, error reports or version checks (the launch uses the same set).
    **registry.quiet_env(),
    # git inside the harness's shell tools.
    "GIT_AUTHOR_NAME": "agentc test",
    "GIT_AUTHOR_EMAIL": "agent@agentc.invalid",
    "GIT_COMMITTER_NAME": "agentc test",
    "GIT_COMMITTER_EMAIL": "agent@agentc.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def binary(name: str) -> Path:
    return BIN_DIR / name


def available(name: str) -> bool:
    return binary(name).exists()


def _base(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = dict(_BASE_ENV, HOME=str(home))
    if os.geteuid() == 0:
        # Claude Code refuses --dangerously-skip-permissions as root unless it is told it runs
        # in a sandbox; tests run as root on CI. Launches run as a role uid and never need it.
        env["IS_SANDBOX"] = "1"
    return env


def claude_env(
    home: Path,
    base_url: str,
    key: str,
    *,
    max_retries: int | None = None,
    max_output_tokens: int | None = None,
) -> dict[str, str]:
    env = _base(home)
    endpoint = harness_env.ModelEndpoint(base_url, key, max_output_tokens=max_output_tokens)
    env.update(claude.setup(endpoint, max_retries=max_retries).env)
    return env


def claude_argv(prompt: str, *, model: str | None = None, partial: bool = False) -> list[str]:
    argv = [
        str(binary("claude")),
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
        "--no-session-persistence",
    ]
    if model:
        argv += ["--model", model]
    if partial:
        argv.append("--include-partial-messages")
    return argv


def codex_env(
    home: Path, base_url: str, key: str, *, model: str = "gpt-5", retries: int = 0
) -> dict[str, str]:
    """``base_url`` is the server root; Codex gets ``<root>/v1`` and the Responses wire API."""
    env = _base(home)
    endpoint = harness_env.ModelEndpoint(base_url, key, model)
    setup = codex.setup(endpoint, home / ".codex", retries=retries)
    harness_env.write_files(setup)
    env.update(setup.env)
    return env


def codex_argv(prompt: str) -> list[str]:
    # --dangerously-bypass-approvals-and-sandbox: Codex's own Landlock/seccomp sandbox and
    # approval prompts are off; the launch's confinement is ours (docs/gateway.md).
    return [
        str(binary("codex")),
        "exec",
        "--json",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        prompt,
    ]


def pi_env(
    home: Path,
    base_url: str,
    key: str,
    *,
    model: str = pi.DEFAULT_MODEL,
    max_output_tokens: int | None = None,
) -> dict[str, str]:
    env = _base(home)
    setup = pi.setup(harness_env.ModelEndpoint(base_url, key, model, max_output_tokens), home)
    harness_env.write_files(setup)
    env.update(setup.env)
    return env


def pi_argv(prompt: str, *, model: str = pi.DEFAULT_MODEL) -> list[str]:
    return [
        str(binary("pi")),
        "-p",
        "--mode",
        "json",
        "--provider",
        harness_env.PROVIDER,
        "--model",
        model,
        "--no-session",
        prompt,
    ]


@dataclass
class HarnessRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for line in self.stdout.splitlines():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]


def run(argv: list[str], env: dict[str, str], cwd: Path, *, timeout: float = 60) -> HarnessRun:
    proc = run_check(argv, env=env, timeout=timeout, cwd=str(cwd))
    return HarnessRun(proc.returncode, proc.stdout, proc.stderr)
