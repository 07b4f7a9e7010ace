"""Where the client finds its coordinator, its credentials and its state.

- The repository binding `.agent-coordinator.toml` (`service_url`, `project_id`, optional
  `project_name`) is found by walking up from the working directory, unless
  `--repo-config` or `AGENT_COORDINATOR_REPO_CONFIG` names one (that then wins).
- The state directory is `--state-dir`, `AGENT_COORDINATOR_STATE_DIR` or
  `~/.local/state/agent-coordinator`; a binding that names a project uses
  `<state>/<project_name>/config/` instead. It holds `credentials.toml` (mode 0600, owned by the
  caller, one link, at most 1 MiB: read with `agentc.files.read_private`) and
  `sessions/<name>.json` (session id, proof and the mutation journal).
- A token comes from `AGENT_COORDINATOR_TOKEN` (one call) or the credentials file, whose
  `[[credentials]]` entry matches the binding's origin exactly after normalization.
- Plain `http://` is refused unless the host is loopback and insecure loopback is allowed
  (`--allow-insecure-loopback` or `AGENT_COORDINATOR_ALLOW_INSECURE_LOOPBACK=true`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from agentc.client.errors import SetupRequired
from agentc.core.addresses import is_loopback_host
from agentc.core.errors import ConfigError
from agentc.core.rules import check_id
from agentc.files import UnsafeFile, load_toml, read_private
from agentc.files.toml import parse_toml, toml_string

BINDING_FILE = ".agent-coordinator.toml"
CREDENTIALS_FILE = "credentials.toml"
ENV_PREFIX = "AGENT_COORDINATOR_"
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_BINDING_KEYS = {"service_url", "project_id", "project_name"}
CREDENTIALS_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Binding:
    """A checkout's `.agent-coordinator.toml`."""

    path: Path
    origin: str
    project_id: str
    project_name: str | None


@dataclass(frozen=True)
class Options:
    """What the command line says (None: not given, fall back to the environment)."""

    state_dir: str | None = None
    repo_config: str | None = None
    session: str | None = None
    allow_insecure_loopback: bool = False


@dataclass(frozen=True)
class Settings:
    """Everything a command needs to reach the coordinator, resolved once."""

    binding: Binding
    state_dir: Path
    session_name: str
    token: str | None
    token_source: str
    # The candidate push helper's socket (set by the supervisor inside an implementer launch).
    push_socket: Path | None = None

    @property
    def origin(self) -> str:
        return self.binding.origin

    @property
    def project_id(self) -> str:
        return self.binding.project_id

    def require_token(self) -> str:
        if self.token is None:
            raise SetupRequired(
                f"no credential for {self.origin}: add a [[credentials]] entry with this origin "
                f"to {self.state_dir / CREDENTIALS_FILE} (mode 0600) or set "
                "AGENT_COORDINATOR_TOKEN"
            )
        return self.token


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def normalize_origin(url: str, *, allow_insecure_loopback: bool, what: str) -> str:
    """`scheme://host[:port]`, lower case, default port dropped; refuses paths and userinfo."""
    if not isinstance(url, str) or not url:
        raise ConfigError(f"{what}: must be a URL such as https://coordinator.example")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{what}: {url!r} is not a valid URL ({exc})") from exc
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        raise ConfigError(f"{what}: {url!r} must be an http(s) URL with a host")
    if parts.username or parts.password:
        raise ConfigError(f"{what}: the URL must not carry a user name or password")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{what}: {url!r} must be an origin only (no path, query or fragment)")
    if scheme == "http":
        if not is_loopback_host(host):
            raise ConfigError(
                f"{what}: plain http is refused for {host}; use https (http is allowed only "
                "for a loopback host)"
            )
        if not allow_insecure_loopback:
            raise SetupRequired(
                f"{what}: plain http to {host} needs --allow-insecure-loopback or "
                "AGENT_COORDINATOR_ALLOW_INSECURE_LOOPBACK=true"
            )
    default = {"http": 80, "https": 443}[scheme]
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port in (None, default) else f"{shown}:{port}"
    return f"{scheme}://{netloc}"


def _named(env: Mapping[str, str], explicit: str | None, variable: str) -> str | None:
    """What the command line or else the environment variable names, if either does."""
    return explicit or env.get(ENV_PREFIX + variable) or None


def find_binding(cwd: Path, env: Mapping[str, str], explicit: str | None) -> Path | None:
    named = _named(env, explicit, "REPO_CONFIG")
    if named:
        path = Path(named)
        if not path.is_file():
            raise SetupRequired(f"the repository binding {path} does not exist")
        return path
    for directory in (cwd, *cwd.parents):
        candidate = directory / BINDING_FILE
        if candidate.is_file():
            return candidate
    return None


def load_binding(path: Path, *, allow_insecure_loopback: bool) -> Binding:
    data = load_toml(path, what="repository binding")
    if "token" in data or "credentials" in data:
        raise ConfigError(
            f"{path}: tokens never go in the repository binding; put them in credentials.toml"
        )
    unknown = sorted(set(data) - _BINDING_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown field {unknown[0]!r} (allowed: {sorted(_BINDING_KEYS)})"
        )
    for key in ("service_url", "project_id"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ConfigError(f"{path}: {key} is required and must be a string")
    check_id(f"{path}: project_id", data["project_id"])
    name = data.get("project_name")
    if name is not None and (not isinstance(name, str) or not NAME.match(name)):
        raise ConfigError(f"{path}: project_name must match {NAME.pattern}")
    origin = normalize_origin(
        data["service_url"],
        allow_insecure_loopback=allow_insecure_loopback,
        what=f"{path}: service_url",
    )
    return Binding(path, origin, data["project_id"], name)


def state_root(env: Mapping[str, str], explicit: str | None) -> Path:
    named = _named(env, explicit, "STATE_DIR")
    if named:
        if not Path(named).is_absolute():
            raise ConfigError(f"the state directory must be an absolute path, not {named!r}")
        return Path(named)
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "state" / "agent-coordinator"


def credential_text(origin: str, token: str) -> bytes:
    """A credentials file holding one token for ``origin`` (what :func:`read_credentials`
    reads)."""
    return (
        f"[[credentials]]\norigin = {toml_string(origin)}\ntoken = {toml_string(token)}\n".encode()
    )


def read_credentials(path: Path, origin: str, *, allow_insecure_loopback: bool) -> str | None:
    """The token for `origin`, from a file the caller alone owns and can read (None: no file)."""
    try:
        raw = read_private(path, max_bytes=CREDENTIALS_MAX_BYTES)
    except UnsafeFile as exc:
        if exc.missing:
            return None
        raise SetupRequired(
            f"the credentials file {path}: {exc.reason}; it must be 0600 (run: chmod 600 {path})"
        ) from None
    data = parse_toml(raw, path)
    entries = data.get("credentials", [])
    if set(data) - {"credentials"} or not isinstance(entries, list):
        raise ConfigError(f"{path}: expected only [[credentials]] entries")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) - {"origin", "token"}:
            raise ConfigError(f"{path}: credentials[{i}] may hold only origin and token")
        if not isinstance(entry.get("token"), str) or not entry["token"]:
            raise ConfigError(f"{path}: credentials[{i}].token must be a non-empty string")
        entry_origin = normalize_origin(
            str(entry.get("origin", "")),
            allow_insecure_loopback=True,
            what=f"{path}: credentials[{i}].origin",
        )
        if entry_origin == origin:
            token: str = entry["token"]
            return token
    return None


def resolve(
    options: Options, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Settings:
    """Resolve the binding, state directory, session name and token for one command."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    insecure = options.allow_insecure_loopback or truthy(
        env.get(ENV_PREFIX + "ALLOW_INSECURE_LOOPBACK")
    )
    path = find_binding(cwd, env, options.repo_config)
    binding = load_binding(path, allow_insecure_loopback=insecure) if path else None
    if binding is None:
        raise SetupRequired(
            f"no {BINDING_FILE} found in {cwd} or above; create one (service_url, project_id) "
            "or name it with --repo-config or AGENT_COORDINATOR_REPO_CONFIG"
        )
    root = state_root(env, options.state_dir)
    state_dir = root / binding.project_name / "config" if binding.project_name else root
    session = _named(env, options.session, "SESSION") or "default"
    if not NAME.match(session):
        raise ConfigError(f"the session name {session!r} must match {NAME.pattern}")
    token = env.get(ENV_PREFIX + "TOKEN") or None
    source = "AGENT_COORDINATOR_TOKEN"
    if token is not None:
        env_origin = env.get(ENV_PREFIX + "ORIGIN")
        if (
            env_origin
            and normalize_origin(
                env_origin, allow_insecure_loopback=True, what="AGENT_COORDINATOR_ORIGIN"
            )
            != binding.origin
        ):
            raise SetupRequired(
                f"AGENT_COORDINATOR_TOKEN is for {env_origin}, not {binding.origin}; refusing it"
            )
    else:
        source = str(state_dir / CREDENTIALS_FILE)
        token = read_credentials(
            state_dir / CREDENTIALS_FILE, binding.origin, allow_insecure_loopback=insecure
        )
    return Settings(binding, state_dir, session, token, source, push_socket(env))


def push_socket(env: Mapping[str, str]) -> Path | None:
    """``AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET``: an absolute path, or unset."""
    named = env.get(ENV_PREFIX + "CANDIDATE_PUSH_SOCKET")
    if not named:
        return None
    if not os.path.isabs(named):
        raise ConfigError(
            f"AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET must be an absolute path, not {named!r}"
        )
    return Path(named)
