"""What one launch is asked to do (:class:`LaunchRequest`) and the lean parse of its command line.

A ``launch`` command line in its plain form is parsed by :func:`parse_launch` without importing
click: an optional ``--config PATH`` first, then ``launch``, then only launch options, each at
most once, as ``--name value`` or ``--name=value`` with a valid value not starting with ``-``,
and the harness arguments after ``--``. Anything else (help, every other command, a bad or
unusual argument) is left to the click application (:mod:`agentc.supervisor.commands`), which
parses a launch into the same parameters (tests/supervisor/test_launch_lean.py compares the
two). Either way :func:`launch_request` turns the parameters into the request.

Names: a launch is identified by its *launch id* (a UUID; ``--session-id`` on the command line
and ``session_id`` in the run's records, because Claude Code calls it its session); the *agent
session* is agentns's (:mod:`agentc.supervisor.launch.agentsession`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from agentc.core.model_policy import ModelPolicy
from agentc.core.roles import ROLES, Role
from agentc.sandbox.bwrap import Relay
from agentc.supervisor.harness import registry

if TYPE_CHECKING:
    from agentc.supervisor.launch.agentsession import AgentSession

__all__ = [
    "ROLES",
    "CoordinatorAccess",
    "LaunchRequest",
    "VerificationAccess",
    "launch_request",
    "new_launch_id",
    "parse_launch",
]


@dataclass(frozen=True)
class CoordinatorAccess:
    """How the agent CLI inside a launch reaches its coordinator with no flags: the session the
    loop opened and claimed in (its state copied to ``$RUN/state/coordinator``), the loop's
    copy of the repository binding (read-only inside the launch), and the socket of the
    launch's candidate push helper (push/helper.py)."""

    session: str
    repo_config: Path
    allow_insecure_loopback: bool = False
    # The candidate push helper's socket (its directory is bound read-only into the launch).
    push_socket: Path | None = None


@dataclass(frozen=True)
class VerificationAccess:
    """A verifying reviewer's staging coordinator, set by the loop once it signed in and wrote
    ``$RUN/verification.json`` and ``$RUN/verification-session.json``
    (supervisor/loop/verification.py): the staging's loopback address to relay (None: not
    loopback, reached through the egress proxy), the login's directory (an empty tmpfs in the
    launch) and the browser for ``CHROME_BIN``."""

    relay: str | None
    hidden: Path
    browser: Path | None = None

    INFO = "verification.json"
    SESSION = "verification-session.json"

    def env(self, run: Path) -> dict[str, str]:
        env = {"AGENTC_VERIFICATION": str(run / self.INFO)}
        if self.browser is not None:
            env["CHROME_BIN"] = str(self.browser)
        return env

    def relays(self, net: Path) -> list[Relay]:
        if self.relay is None:
            return []
        return [Relay("staging", self.relay, PurePosixPath(net / "staging.sock"))]


@dataclass(frozen=True)
class LaunchRequest:
    role: Role
    harness: str
    run: Path
    clone: Path
    launch_id: str
    model: str = "default"
    harness_args: tuple[str, ...] | None = None  # replaces the default harness flags
    # What the gateway binds the launch's sentinel to (the attempt defaults to the launch id).
    attempt: str | None = None
    generation: int = 1
    task: str | None = None
    project: str | None = None  # the coordinator project (the gateway's ledger rows name it)
    canary: bool = False  # a dedicated canary project's launch: its ledger rows say so
    launch_usd: float | None = None  # a per-launch cap overriding the gateway's own
    # The task's effective model policy, read by the loop after its claim (the gateway's grant).
    model_policy: ModelPolicy = ModelPolicy()
    # The agent session the launch runs in (agentsession.ensure); carried on every record.
    agent_session: AgentSession | None = None
    # Set by the loop for an implementer it claimed for (None: the CLI is not set up).
    coordinator: CoordinatorAccess | None = None
    # Set by the loop for a verifying reviewer (``[verification.<project>]``).
    verification: VerificationAccess | None = None

    def agent_session_fields(self) -> dict[str, str | None]:
        """The agent session's fields for the launch's records (null without a session)."""
        if self.agent_session is not None:
            return dict(self.agent_session.record())
        return {"agentns_session_id": None, "agentns_mode": None, "agentns_intent": None}


# Launch options taking a value, by the parameter name click gives them.
VALUED = {
    "--role": "role",
    "--harness": "harness",
    "--run": "run",
    "--clone": "clone",
    "--model": "model",
    "--session-id": "launch_id",
    "--attempt": "attempt",
    "--generation": "generation",
    "--task": "task",
    "--launch-usd": "launch_usd",
}
DEFAULTS: dict[str, Any] = {
    "harness": "claude",
    "model": "default",
    "launch_id": None,
    "attempt": None,
    "generation": 1,
    "task": None,
    "launch_usd": None,
    "dry_run": False,
}


def new_launch_id(value: str | None) -> str:
    """The launch id: ``value`` in canonical form (ValueError if not a UUID), else a new UUIDv4."""
    import uuid

    return str(uuid.uuid4() if value is None else uuid.UUID(value))


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _convert(name: str, value: str) -> Any:
    """A value as click converts it, or None where click might differ or refuse."""
    if name == "role":
        return value if value in ROLES else None
    if name == "harness":
        return value if registry.named(value) is not None else None
    if name in ("run", "clone"):
        return Path(value)
    if name == "generation":
        return int(value) if _digits(value) else None
    if name == "launch_usd":
        whole, dot, frac = value.partition(".")
        return float(value) if _digits(whole) and (not dot or _digits(frac)) else None
    if name == "launch_id":
        try:
            new_launch_id(value)
        except ValueError:
            return None
    return value


def _split_config(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """``(config path, the rest)`` when the line is ``[--config PATH] launch ...``, else None."""
    rest = list(argv)
    config: str | None = None
    if rest[:1] == ["--config"] and len(rest) > 1:
        config, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith("--config="):
        config, rest = rest[0].removeprefix("--config="), rest[1:]
    if (config is not None and (not config or config.startswith("-"))) or rest[:1] != ["launch"]:
        return None
    return config, rest[1:]


def _parse_options(args: list[str]) -> dict[str, Any] | None:
    """The launch options and harness arguments of a plain launch, else None."""
    params: dict[str, Any] = {"harness_args": ()}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            params["harness_args"] = tuple(args[i + 1 :])
            break
        if arg == "--dry-run" and "dry_run" not in params:
            params["dry_run"] = True
            i += 1
            continue
        option, eq, value = arg.partition("=")
        name = VALUED.get(option)
        if name is None or name in params:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        converted = _convert(name, value) if value and not value.startswith("-") else None
        if converted is None:
            return None
        params[name] = converted
    return params


def parse_launch(argv: Sequence[str]) -> tuple[Path | None, dict[str, Any]] | None:
    """``(config path, launch parameters)`` of a plain launch command line, else None."""
    split = _split_config(argv)
    if split is None:
        return None
    config, args = split
    params = _parse_options(args)
    if params is None or not {"role", "run", "clone"} <= params.keys():
        return None
    return (Path(config) if config is not None else None), {**DEFAULTS, **params}


def launch_request(params: Mapping[str, Any], launch_id: str) -> LaunchRequest:
    """The launch request of parsed launch parameters (either parser's)."""
    return LaunchRequest(
        role="implementer" if params["role"] == "implementer" else "reviewer",
        harness=params["harness"],
        run=params["run"],
        clone=params["clone"],
        launch_id=launch_id,
        model=params["model"],
        harness_args=params.get("harness_args") or None,
        attempt=params.get("attempt"),
        generation=params.get("generation", 1),
        task=params.get("task"),
        launch_usd=params.get("launch_usd"),
    )
