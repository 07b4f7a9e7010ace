"""What a caller of the launcher needs: argv, variable names, modes and the ``--record`` file.

The supervisor wraps every harness launch as::

    wrapper_argv("coder", ["bwrap", ..., "claude", "-p", ...], record=run_dir / RECORD_FILENAME)
    # -> ["agentns-claude", "--intent", "headless:coder", "--record", ".../agentns.json",
    #     "--", "bwrap", ..., "claude", "-p", ...]

The launcher writes the record (atomically, before exec, so it exists once the command runs) and
the supervisor reads it back with :func:`read_record` to carry ``session_id`` and ``mode`` on the
launch's cost rows and events.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from agentc.agentns.errors import RecordError, UsageError

LAUNCHER = "agentns-claude"
PREFIX = "[agentns-claude] "

# Variables the wrapped command sees. The first three are always set; the budget pair only when
# --budget was given (and removed otherwise, so a nested launch never inherits a stale claim).
ENV_SESSION_ID = "AGENTNS_SESSION_ID"
ENV_INTENT = "AGENTNS_INTENT"
ENV_MODE = "AGENTNS_MODE"
ENV_BUDGET_ENFORCED = "AGENTNS_BUDGET_ENFORCED"
ENV_BUDGET_UNENFORCED = "AGENTNS_BUDGET_UNENFORCED"
CHILD_ENV_VARS: tuple[str, ...] = (
    ENV_SESSION_ID,
    ENV_INTENT,
    ENV_MODE,
    ENV_BUDGET_ENFORCED,
    ENV_BUDGET_UNENFORCED,
)

# The mock inputs (the file wins over the variable).
ENV_MOCK_FILE = "AGENTNS_MOCK_FILE"
ENV_SESSION_ID_OVERRIDE = "AGENTNS_SESSION_ID_OVERRIDE"
DEFAULT_MOCK_FILE = "/tmp/agentns-mock"  # noqa: S108 - the original's documented mock path

# AGENTNS_MODE values: how the id was obtained. Only "prctl" is a real kernel namespace.
MODE_MOCK = "mock"
MODE_NO_UNSHARE = "no-unshare"
MODE_SYNTH_FALLBACK = "synth-fallback"
MODE_PRCTL = "prctl"
MODES: tuple[str, ...] = (MODE_MOCK, MODE_NO_UNSHARE, MODE_SYNTH_FALLBACK, MODE_PRCTL)

RECORD_FILENAME = "agentns.json"
RECORD_FORMAT = 1


def session_env(session_id: str, intent: str, mode: str) -> dict[str, str]:
    """The variables that name the agent session to the wrapped command (always all three)."""
    return {ENV_SESSION_ID: session_id, ENV_INTENT: intent, ENV_MODE: mode}


def headless_intent(role: str) -> str:
    """The intent tag for a headless harness run of ``role``: ``headless:<role>``."""
    role = role.strip()
    if not role:
        raise UsageError("role must be non-empty")
    return f"headless:{role}"


def wrapper_argv(
    role: str,
    command: Sequence[str],
    *,
    budget: str | None = None,
    no_unshare: bool = False,
    record: str | os.PathLike[str] | None = None,
    launcher: str = LAUNCHER,
) -> list[str]:
    """Build ``[launcher, "--intent", "headless:<role>", ..., "--", *command]``."""
    if not command:
        raise UsageError("command must be non-empty")
    argv = [launcher, "--intent", headless_intent(role)]
    if budget is not None:
        argv += ["--budget", budget]
    if no_unshare:
        argv.append("--no-unshare")
    if record is not None:
        argv += ["--record", os.fspath(record)]
    return [*argv, "--", *command]


@dataclass(frozen=True)
class SessionRecord:
    """One launch's agent session, as written by ``--record`` before exec.

    ``pid`` is the launcher's pid, which is also the command's pid (exec keeps it).
    """

    session_id: str
    mode: str
    intent: str
    pid: int
    budget: str | None = None
    budget_enforced: tuple[str, ...] = ()
    budget_unenforced: tuple[str, ...] = ()

    def env(self) -> dict[str, str]:
        """The session's variables for the wrapped command (:func:`session_env`)."""
        return session_env(self.session_id, self.intent, self.mode)

    def to_json(self) -> str:
        import json  # lazily, like the other record-only imports: launcher start-up matters

        doc = {"format": RECORD_FORMAT, **asdict(self)}
        doc["budget_enforced"] = list(self.budget_enforced)
        doc["budget_unenforced"] = list(self.budget_unenforced)
        return json.dumps(doc, sort_keys=True) + "\n"


def write_record(path: str | os.PathLike[str], record: SessionRecord) -> None:
    """Write ``record`` atomically (temporary file, then rename), so readers never see half."""
    from pathlib import Path

    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(record.to_json(), encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass  # the temporary file was never created
        raise RecordError(f"--record {target}: {exc.strerror or exc}") from None


def _str_tuple(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordError(f"record field {key} must be a list of strings")
    return tuple(value)


def read_record(path: str | os.PathLike[str]) -> SessionRecord:
    """Read a record written by ``--record``; :class:`RecordError` if missing or malformed."""
    import json
    from pathlib import Path

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecordError(f"cannot read agentns record {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
        raise RecordError(f"{path} is not an agentns record (format {RECORD_FORMAT})")
    sid, mode, intent, pid = (doc.get(k) for k in ("session_id", "mode", "intent", "pid"))
    budget = doc.get("budget")
    if not (isinstance(sid, str) and isinstance(intent, str) and mode in MODES):
        raise RecordError(f"{path}: session_id, mode or intent missing or invalid")
    if not isinstance(pid, int) or (budget is not None and not isinstance(budget, str)):
        raise RecordError(f"{path}: pid or budget invalid")
    return SessionRecord(
        session_id=sid,
        mode=str(mode),
        intent=intent,
        pid=pid,
        budget=budget,
        budget_enforced=_str_tuple(doc.get("budget_enforced", []), "budget_enforced"),
        budget_unenforced=_str_tuple(doc.get("budget_unenforced", []), "budget_unenforced"),
    )


def session_from_env(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(session_id, mode)`` from a wrapped process's environment, if it was launched so."""
    sid, mode = env.get(ENV_SESSION_ID), env.get(ENV_MODE)
    if sid and mode in MODES:
        return sid, str(mode)
    return None
