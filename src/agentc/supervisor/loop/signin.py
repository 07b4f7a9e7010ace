"""Whether a vendor can sign in, checked at admission: a vendor whose credential is missing,
expired or signed out is skipped like a rate-limited one (primary, then fallback).

Which credential a vendor uses depends on how its launches reach the model:

* ``claude`` with ``token_in_env``: the role's own token file ``<state>/<role>/claude-token``
  (:func:`agentc.supervisor.launch.tokens.read_token`'s rules). Missing or refused: skipped.
  Expired: the file's modification time plus ``[health] token_lifetime_days`` has passed.
  Signed out: Claude Code's own sign-in check, ``claude auth status`` with the token in
  ``CLAUDE_CODE_OAUTH_TOKEN``, exits non-zero (only the exit code is used; 30 s limit; an
  empty private ``HOME``; a success is remembered for ``SIGNED_IN_SECONDS`` while the token
  file and the program are unchanged, so a poll does not pay for it every time).
* every other vendor through the gateway (the default): the gateway's upstream credential
  file, found in the gateway's configuration (``[health] gateway_config``). Missing or
  unreadable: skipped. An OAuth token (``{"oauth_token": ...}``) expires like a Claude token
  file (modification time plus ``token_lifetime_days``); an API key does not expire.
* ``command:<path>``, or a gateway whose configuration is not known: nothing to check.

Errors name the file and the rule, never its bytes.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from agentc.core.errors import AgentcError, SupervisorError
from agentc.core.roles import role_slug
from agentc.core.rules import rfc3339
from agentc.files.accounts import become
from agentc.files.options import default_config
from agentc.files.procs import run_check, system_env
from agentc.sandbox import reaper
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.command import PREFIX as COMMAND_PREFIX
from agentc.supervisor.launch import tokens

CHECK_TIMEOUT = 30.0
SIGNED_IN_SECONDS = 600.0
DEFAULT_GATEWAY_CONFIG = default_config("gateway")
DAY = 24 * 3600

# (program, token file identity) -> when the sign-in check last passed (monotonic)
_signed_in: dict[tuple[str, tuple[int, int, int, int]], float] = {}


def _expiry(path: Path, config: SupervisorConfig) -> float | None:
    """When the credential file expires: its modification time plus ``token_lifetime_days``."""
    try:
        mtime = os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return None
    return mtime + config.health.token_lifetime_days * DAY


def _expired(path: Path, config: SupervisorConfig, now: float) -> str | None:
    """``credential expired at <time>`` when the file is older than the token lifetime."""
    ends = _expiry(path, config)
    if ends is None or ends > now:
        return None
    return f"credential expired at {rfc3339(int(ends * 1000))} ({path} plus token_lifetime_days)"


def _identity(path: Path) -> tuple[int, int, int, int]:
    info = os.stat(path, follow_symlinks=False)
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def claude_signed_out(
    config: SupervisorConfig, token_file: Path, token: str, role: str = "implementer"
) -> str | None:
    """Run ``claude auth status`` with the token; why the vendor is signed out, or None.

    In host mode it runs as the role's account (never as root: the check is the vendor's
    program, run with the role's own token), in an empty home that account owns."""
    program = config.harness_program("claude")
    try:
        key = (str(program), _identity(token_file))
    except OSError:
        key = None
    if key is not None and time.monotonic() - _signed_in.get(key, -1e9) < SIGNED_IN_SECONDS:
        return None
    child: Callable[[], None] = reaper.child_setup
    with tempfile.TemporaryDirectory(prefix="agentc-signin-") as home:
        if config.mode == "host":
            from agentc.supervisor.launch import root as launch_root

            try:
                account = launch_root.role_account(config, role)
            except SupervisorError as exc:
                return f"signed out: {exc}"
            os.chown(home, account.pw_uid, account.pw_gid)

            def child() -> None:
                reaper.child_setup()
                become(account)

        env = system_env(
            HOME=home,
            CLAUDE_CONFIG_DIR=f"{home}/.claude",
            CLAUDE_CODE_OAUTH_TOKEN=token,
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
        )
        try:
            done = run_check(
                [str(program), "auth", "status", "--json"],
                env=env,
                timeout=CHECK_TIMEOUT,
                cwd=home,
                preexec_fn=child,
            )
        except subprocess.TimeoutExpired:
            return f"signed out: claude auth status did not answer within {CHECK_TIMEOUT:g} s"
        except OSError as exc:
            return f"signed out: cannot run {program} auth status ({exc.strerror})"
    if done.returncode != 0:
        return f"signed out: claude auth status exited {done.returncode}"
    if key is not None:
        _signed_in[key] = time.monotonic()
    return None


def _own_token(config: SupervisorConfig, role: str, now: float) -> str | None:
    """Claude with ``token_in_env``: the role's token file, its age and the sign-in check."""
    path = config.resolved_state_dir() / role_slug(role) / "claude-token"
    if not os.path.lexists(path):
        return f"credential missing ({path})"
    gid = None
    if config.mode == "host":
        import grp

        try:
            gid = grp.getgrnam(config.role_user(role)).gr_gid
        except KeyError:
            gid = None
    try:
        token = tokens.read_token(path, mode=config.mode, group_gid=gid)
    except AgentcError as exc:
        return f"credential unusable ({exc})"
    return _expired(path, config, now) or claude_signed_out(config, path, token, role)


def gateway_config_path(config: SupervisorConfig) -> Path | None:
    """``[health] gateway_config``, else ``/etc/agentc/gateway.toml`` when it exists."""
    if config.health.gateway_config is not None:
        return config.health.gateway_config
    return DEFAULT_GATEWAY_CONFIG if DEFAULT_GATEWAY_CONFIG.exists() else None


def _gateway_credential(config: SupervisorConfig, harness: str) -> tuple[Path | None, str | None]:
    """The gateway upstream's credential file for ``harness``, or why it cannot be found
    (``(None, None)``: no gateway configuration is known, nothing to check)."""
    path = gateway_config_path(config)
    if path is None:
        return None, None
    from agentc.gateway.config import GatewayConfig

    try:
        gateway = GatewayConfig.load(path, what="gateway configuration")
    except (AgentcError, OSError, ValueError) as exc:
        why = " ".join(str(exc).split())[:200]
        return None, f"the gateway configuration cannot be read ({why})"
    upstream = config.gateway_upstreams.get(harness, harness)
    entry = gateway.upstreams.get(upstream)
    if entry is None:
        return None, f"credential missing (the gateway at {path} has no upstream {upstream})"
    return entry.credential_file, None


def _gateway(config: SupervisorConfig, harness: str, now: float) -> str | None:
    """Through the gateway: the upstream's credential file exists, reads and has not expired."""
    from agentc.gateway.credentials import read_credential
    from agentc.gateway.errors import CredentialError

    credential_file, problem = _gateway_credential(config, harness)
    if credential_file is None:
        return problem
    try:
        credential = read_credential(credential_file)
    except CredentialError as exc:
        missing = "does not exist" in str(exc)
        return f"credential {'missing' if missing else 'unusable'} ({exc})"
    if credential.kind == "oauth":
        return _expired(credential_file, config, now)
    return None


def token_opt_in(config: SupervisorConfig, harness: str) -> bool:
    """``harness`` reaches its vendor directly with the role's own token (``token_in_env``)."""
    adapter = registry.named(harness)
    return config.token_in_env and adapter is not None and adapter.token_env is not None


def _expiring_file(config: SupervisorConfig, harness: str, role: str) -> Path | None:
    """The credential file of ``harness`` for ``role`` that expires (None: none that does)."""
    if harness.startswith(COMMAND_PREFIX):
        return None
    if token_opt_in(config, harness):
        return config.resolved_state_dir() / role_slug(role) / "claude-token"
    if config.gateway_target() is None:
        return None
    from agentc.gateway.credentials import read_credential
    from agentc.gateway.errors import CredentialError

    credential_file, _problem = _gateway_credential(config, harness)
    if credential_file is None:
        return None
    try:
        oauth = read_credential(credential_file).kind == "oauth"
    except CredentialError:
        return None  # admission names it
    return credential_file if oauth else None


def expiry_warnings(
    config: SupervisorConfig, vendors: Sequence[tuple[str, str]], now: float
) -> list[str]:
    """A warning for each credential of ``vendors`` (harness, role) that expires within
    ``[health] expiry_warn_days`` (one already expired is admission's refusal, not a warning)."""
    window = config.health.expiry_warn_days * DAY
    warnings: list[str] = []
    seen: set[Path] = set()
    for harness, role in vendors:
        path = _expiring_file(config, harness, role)
        if path is None or path in seen:
            continue
        seen.add(path)
        ends = _expiry(path, config)
        if ends is not None and now < ends <= now + window:
            days, at = int((ends - now) // DAY), rfc3339(int(ends * 1000))
            warnings.append(
                f"the {harness} credential {path} expires at {at} (in {days} days): "
                "renew it before then (token_lifetime_days counts from its modification time)"
            )
    return warnings


def vendor_problem(config: SupervisorConfig, harness: str, role: str) -> str | None:
    """Why the vendor ``harness`` cannot be used for ``role`` now (None: it can)."""
    if harness.startswith(COMMAND_PREFIX):
        return None
    now = time.time()
    if token_opt_in(config, harness):
        return _own_token(config, role, now)
    if config.gateway_target() is not None:
        return _gateway(config, harness, now)
    return None
