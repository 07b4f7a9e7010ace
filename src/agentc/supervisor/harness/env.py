"""How each harness reaches its model: the one place that knows every harness's switches.

A harness is pointed at a model endpoint (the model gateway's loopback address inside a
launch, or a scripted provider in tests) with a key (the launch's sentinel, never a real
credential):

- Claude Code: ``ANTHROPIC_BASE_URL`` + ``ANTHROPIC_API_KEY`` in its environment;
- Codex: a ``model_providers.agentc`` table (``base_url`` = ``<root>/v1``, ``env_key``,
  Responses wire API) in ``$CODEX_HOME/config.toml``, the key in ``OPENAI_API_KEY``;
- Pi: a provider ``agentc`` (Anthropic Messages API, ``baseUrl`` + ``apiKey``) in
  ``~/.pi/agent/models.json``, selected with ``--provider agentc --model <id>``.

``QUIET_ENV`` holds the switches that keep every harness offline apart from its model calls (no
auto-update, telemetry, error reports or version checks). Both the launch layer
(``agentc.supervisor.launch.execute``) and the test helpers (``agentc.testing.harnesses``) build
their configuration here; nothing in this module touches the network.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

PROVIDER = "agentc"
# Pi has no built-in default for a custom provider: it is told which model id to use.
DEFAULT_PI_MODEL = "claude-sonnet-5"
CODEX_KEY_ENV = "OPENAI_API_KEY"

QUIET_ENV: dict[str, str] = {
    # Claude Code: no updater, telemetry, error reports or other non-essential traffic.
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    # Pi: offline mode, no telemetry or version check.
    "PI_OFFLINE": "1",
    "PI_TELEMETRY": "0",
    "PI_SKIP_VERSION_CHECK": "1",
}

# Every variable through which a harness could be handed a model credential directly; a
# launch configured for the gateway sets only the sentinel ones it needs.
CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
)


@dataclass(frozen=True)
class ModelEndpoint:
    """Where a harness sends its model calls: a server root (no ``/v1``) and the key to use."""

    base_url: str
    key: str = field(repr=False)
    model: str | None = None  # None: the harness's own default (Pi: DEFAULT_PI_MODEL)


@dataclass(frozen=True)
class HarnessSetup:
    """What one harness needs: environment entries, files to write, extra argv flags."""

    env: dict[str, str] = field(repr=False)
    files: dict[Path, str] = field(default_factory=dict, repr=False)
    args: tuple[str, ...] = ()


def _root(base_url: str) -> str:
    return base_url.rstrip("/")


def claude_setup(endpoint: ModelEndpoint, *, max_retries: int | None = None) -> HarnessSetup:
    env = {"ANTHROPIC_BASE_URL": _root(endpoint.base_url), "ANTHROPIC_API_KEY": endpoint.key}
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
    return HarnessSetup(env)


def codex_config(endpoint: ModelEndpoint, *, retries: int = 0) -> str:
    """``config.toml`` for Codex: the provider table; the key itself stays in the env."""
    lines = [f'model_provider = "{PROVIDER}"']
    if endpoint.model:
        lines.append(f"model = {json.dumps(endpoint.model)}")
    lines += [
        "check_for_update_on_startup = false",
        "",
        f"[model_providers.{PROVIDER}]",
        f'name = "{PROVIDER}"',
        f"base_url = {json.dumps(_root(endpoint.base_url) + '/v1')}",
        f'env_key = "{CODEX_KEY_ENV}"',
        'wire_api = "responses"',
        f"request_max_retries = {retries}",
        f"stream_max_retries = {retries}",
    ]
    return "\n".join(lines) + "\n"


def codex_setup(endpoint: ModelEndpoint, codex_home: Path, *, retries: int = 0) -> HarnessSetup:
    env = {"CODEX_HOME": str(codex_home), CODEX_KEY_ENV: endpoint.key}
    return HarnessSetup(env, {codex_home / "config.toml": codex_config(endpoint, retries=retries)})


def pi_model(endpoint: ModelEndpoint) -> str:
    return endpoint.model or DEFAULT_PI_MODEL


def pi_models_json(endpoint: ModelEndpoint) -> str:
    models = {
        "providers": {
            PROVIDER: {
                "baseUrl": _root(endpoint.base_url),
                "api": "anthropic-messages",
                "apiKey": endpoint.key,
                "models": [{"id": pi_model(endpoint)}],
            }
        }
    }
    return json.dumps(models, indent=2) + "\n"


def pi_args(model: str | None) -> tuple[str, ...]:
    """Pi's flags selecting the ``agentc`` provider of models.json and its model."""
    return ("--provider", PROVIDER, "--model", model or DEFAULT_PI_MODEL)


def pi_setup(endpoint: ModelEndpoint, home: Path) -> HarnessSetup:
    files = {home / ".pi/agent/models.json": pi_models_json(endpoint)}
    return HarnessSetup({}, files, pi_args(endpoint.model))


def setup(harness: str, endpoint: ModelEndpoint, *, home: Path, codex_home: Path) -> HarnessSetup:
    """The setup of ``harness`` (claude, codex, pi) for ``endpoint``."""
    if harness == "claude":
        return claude_setup(endpoint)
    if harness == "codex":
        return codex_setup(endpoint, codex_home)
    if harness == "pi":
        return pi_setup(endpoint, home)
    raise ValueError(f"unknown harness {harness!r}")


def write_files(harness_setup: HarnessSetup, *, exclusive: bool = False) -> None:
    """Write the setup's files 0600 (parents 0700); ``exclusive`` refuses an existing file or a
    symlink (a launch's fresh home), otherwise a file is replaced (a test's throwaway home)."""
    for path, text in harness_setup.files.items():
        _make_parents(path.parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        flags |= os.O_EXCL if exclusive else os.O_TRUNC
        fd = os.open(path, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text)


def _make_parents(path: Path) -> None:
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for item in reversed(missing):
        os.mkdir(item, 0o700)
        os.chmod(item, 0o700)
