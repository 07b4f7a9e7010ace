"""``agentc-supervisor``'s entry point, kept lean because every launch starts here.

A ``launch`` command line in its plain form is parsed and run here without importing click:
an optional ``--config PATH`` first, then ``launch``, then only launch options, each at most
once, as ``--name value`` or ``--name=value`` with a valid value not starting with ``-``, and
the harness arguments after ``--``. Anything else (help, every other command, a bad or
unusual argument) goes to the click application, :data:`agentc.supervisor.commands.main`,
which parses a launch into the same parameters (tests/supervisor/test_launch_lean.py compares
the two) and reports errors. Both run the launch with :func:`run_launch`.

Every refusal prints ``agentc-supervisor: <message>`` and exits 1; never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from agentc.supervisor.config import SupervisorConfig
    from agentc.supervisor.launch import LaunchRequest

ROLES = ("implementer", "reviewer")
HARNESSES = ("claude", "codex", "pi")
# Launch options taking a value, by the parameter name click gives them.
VALUED = {
    "--role": "role",
    "--harness": "harness",
    "--run": "run",
    "--clone": "clone",
    "--model": "model",
    "--session-id": "session_id",
    "--attempt": "attempt",
    "--generation": "generation",
    "--task": "task",
    "--launch-usd": "launch_usd",
}
DEFAULTS: dict[str, Any] = {
    "harness": "claude",
    "model": "default",
    "session_id": None,
    "attempt": None,
    "generation": 1,
    "task": None,
    "launch_usd": None,
    "dry_run": False,
}


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _convert(name: str, value: str) -> Any:
    """A value as click converts it, or None where click might differ or refuse."""
    if name == "role":
        return value if value in ROLES else None
    if name == "harness":
        return value if value in HARNESSES else None
    if name in ("run", "clone"):
        return Path(value)
    if name == "generation":
        return int(value) if _digits(value) else None
    if name == "launch_usd":
        whole, dot, frac = value.partition(".")
        return float(value) if _digits(whole) and (not dot or _digits(frac)) else None
    if name == "session_id":
        import uuid

        try:
            uuid.UUID(value)
        except ValueError:
            return None
    return value


def parse_launch(argv: Sequence[str]) -> tuple[Path | None, dict[str, Any]] | None:
    """``(config path, launch parameters)`` of a plain launch command line, else None."""
    rest = list(argv)
    config: str | None = None
    if rest[:1] == ["--config"] and len(rest) > 1:
        config, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith("--config="):
        config, rest = rest[0].removeprefix("--config="), rest[1:]
    if (config is not None and (not config or config.startswith("-"))) or rest[:1] != ["launch"]:
        return None
    params: dict[str, Any] = {}
    harness_args: tuple[str, ...] = ()
    i = 1
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            harness_args = tuple(rest[i + 1 :])
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
            if i + 1 >= len(rest):
                return None
            value = rest[i + 1]
            i += 1
        i += 1
        converted = _convert(name, value) if value and not value.startswith("-") else None
        if converted is None:
            return None
        params[name] = converted
    if not {"role", "run", "clone"} <= params.keys():
        return None
    return (Path(config) if config is not None else None), {
        **DEFAULTS,
        **params,
        "harness_args": harness_args,
    }


def launch_request(params: Mapping[str, Any], session_id: str) -> LaunchRequest:
    """The launch request of parsed launch parameters (either parser's)."""
    from agentc.supervisor.launch import LaunchRequest

    return LaunchRequest(
        role="implementer" if params["role"] == "implementer" else "reviewer",
        harness=params["harness"],
        run=params["run"],
        clone=params["clone"],
        session_id=session_id,
        model=params["model"],
        harness_args=params["harness_args"] or None,
        attempt=params.get("attempt"),
        generation=params.get("generation", 1),
        task=params.get("task"),
        launch_usd=params.get("launch_usd"),
    )


def run_launch(config: SupervisorConfig, request: LaunchRequest, dry_run: bool) -> int:
    """Plan, check and run one launch (or print its plan); returns the exit status.

    A real launch first makes sure it runs in its agent session: it keeps an inherited one for
    ``headless:<role>``, else establishes one in this process (:mod:`.agentsession`).
    """
    import dataclasses

    from agentc.supervisor import agentsession

    if dry_run:
        session = agentsession.current(request.role)
    else:
        session = agentsession.ensure(config, request.role)
    request = dataclasses.replace(request, agentns=session)

    import json

    from agentc.core.errors import SupervisorError
    from agentc.supervisor import launch as launch_mod
    from agentc.supervisor import preflight

    plan = launch_mod.plan(config, request)
    if dry_run:
        print(json.dumps(launch_mod.describe(plan), indent=2), flush=True)
        return 0
    problems = preflight.launch_problems(config, plan)
    if problems:
        raise SupervisorError("preflight: " + "; ".join(problems))
    outcome = launch_mod.execute(plan)
    result = {
        "session_id": request.session_id,
        "reason": outcome.reason,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        **launch_mod.agentns_fields(request),
    }
    if plan.gateway is not None:
        result["cap"] = outcome.cap
    print(json.dumps(result), flush=True)
    return outcome.shell_status


def _fail(message: str) -> NoReturn:
    print(f"agentc-supervisor: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def main(args: Sequence[str] | None = None) -> None:
    """The ``agentc-supervisor`` command."""
    argv = list(sys.argv[1:] if args is None else args)
    parsed = parse_launch(argv)
    if parsed is None:
        from agentc.supervisor import commands

        commands.main.main(args=argv)  # exits
    import uuid

    from agentc.core.errors import AgentcError
    from agentc.supervisor.config import load_config

    config_path, params = parsed
    raw = params["session_id"]
    session = str(uuid.uuid4() if raw is None else uuid.UUID(raw))
    try:
        config = load_config(config_path)
        code = run_launch(config, launch_request(params, session), params["dry_run"])
    except AgentcError as exc:
        _fail(str(exc))
    except OSError as exc:  # an unexpected host condition: name it, no traceback
        _fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    sys.exit(code)


if __name__ == "__main__":  # python -m agentc.supervisor.cli (a prefix usable without the script)
    main()
