"""Run the real harness binaries (Claude Code, Codex, Pi) offline against a local endpoint.

Each ``*_env`` function builds a throwaway home for one harness that points it at a local base
URL with a given key and keeps it quiet (no auto-update, telemetry or version checks), and
returns the complete environment: nothing is inherited from the caller, so no credential of
the calling process can leak into a harness. ``run`` starts the binary and parses its JSON
event stream.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The pinned binaries live in tools/harnesses (installed by scripts/setup --dev).
_REPO = Path(__file__).resolve().parents[3]
BIN_DIR = Path(
    os.environ.get("AGENTC_HARNESS_BIN_DIR", _REPO / "tools/harnesses/node_modules/.bin")
)

_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "NO_COLOR": "1",
    # Claude Code: no updater, telemetry, error reports or other non-essential traffic.
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    # Pi: offline mode.
    "PI_OFFLINE": "1",
    "PI_TELEMETRY": "0",
    "PI_SKIP_VERSION_CHECK": "1",
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
    home: Path, base_url: str, key: str, *, max_retries: int | None = None
) -> dict[str, str]:
    env = _base(home)
    env["ANTHROPIC_BASE_URL"] = base_url
    env["ANTHROPIC_API_KEY"] = key
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
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
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model_provider = "agentc"\nmodel = {json.dumps(model)}\n'
        "check_for_update_on_startup = false\n\n"
        "[model_providers.agentc]\n"
        'name = "agentc"\n'
        f"base_url = {json.dumps(base_url.rstrip('/') + '/v1')}\n"
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        f"request_max_retries = {retries}\n"
        f"stream_max_retries = {retries}\n",
        encoding="utf-8",
    )
    env["CODEX_HOME"] = str(codex_home)
    env["OPENAI_API_KEY"] = key
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
    home: Path, base_url: str, key: str, *, model: str = "claude-sonnet-5"
) -> dict[str, str]:
    env = _base(home)
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    models = {
        "providers": {
            "agentc": {
                "baseUrl": base_url.rstrip("/"),
                "api": "anthropic-messages",
                "apiKey": key,
                "models": [{"id": model}],
            }
        }
    }
    (agent_dir / "models.json").write_text(json.dumps(models), encoding="utf-8")
    return env


def pi_argv(prompt: str, *, model: str = "claude-sonnet-5") -> list[str]:
    return [
        str(binary("pi")),
        "-p",
        "--mode",
        "json",
        "--provider",
        "agentc",
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
    proc = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return HarnessRun(proc.returncode, proc.stdout, proc.stderr)
