"""The loop's part of a launch's event log (:mod:`agentc.files.launchlog`, decision D47).

When a launch is over, the loop (outside the sandbox, root in host mode) appends what only it
sees: each push the launch's helper made (the helper's own record) and how the launch ended
(from the run's terminal record: exit, the resource limit hit, the gateway refusal that ended
its model access, the leftover processes the reaper killed, and why the loop stopped it). For
an implementer it then records the log's summary with the attempt (``POST
.../attempts/{a}/artifacts/launch-log``), tied to the submission when the agent submitted,
so the reviewer's claim and the console's change page show it. Best effort, like the steps: a
failure is said in the loop's log and the settling goes on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentc.core.errors import AgentcError
from agentc.files import open_regular
from agentc.files.launchlog import LaunchLogs, read_log, summarize
from agentc.supervisor.loop import artifacts

if TYPE_CHECKING:
    from agentc.client.ops import Agent

TERMINAL_MAX = 64 * 1024
_ENDED = ("exit_code", "signal", "reason", "limit", "cap", "stop", "killed")
_AGENT_TEXT = ("models", "hosts", "denied", "pushes")  # may quote the agent


def terminal_record(run: Path) -> dict[str, Any]:
    """The run's ``.state-terminal.json`` (written by the launch once every process of it was
    gone), or {} when there is none or it cannot be read."""
    try:
        with open_regular(run / ".state-terminal.json") as handle:
            record = json.loads(handle.read(TERMINAL_MAX))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def end_events(
    run: Path, pushes: list[dict[str, Any]], stopped: str | None
) -> list[dict[str, Any]]:
    """The launch's pushes and its end, as events of its log."""
    record = terminal_record(run)
    ended: dict[str, Any] = {"event": "launch_ended"}
    ended.update((k, record[k]) for k in _ENDED if record.get(k) is not None)
    if stopped is not None:
        ended["stopped_by"] = stopped
    keys = ("ok", "ref", "revision", "error", "seconds")
    return [*({"event": "push", **{k: p[k] for k in keys if k in p}} for p in pushes), ended]


def append_end(
    directory: Path | None,
    launch_id: str,
    run: Path,
    pushes: list[dict[str, Any]],
    stopped: str | None,
) -> str | None:
    """Append the launch's end to its log; what went wrong, or None."""
    if directory is None:
        return None
    logs = LaunchLogs(directory, "supervisor")
    try:
        for event in end_events(run, pushes, stopped):
            logs.append(launch_id, event)
    except OSError as exc:
        return f"the launch's event log could not be written: {exc.strerror or exc}"
    finally:
        logs.close()
    return None


def summary_body(directory: Path, launch_id: str, submission_id: str | None) -> dict[str, Any]:
    """The body of ``POST .../artifacts/launch-log``: the log's summary."""
    body = summarize(read_log(directory, launch_id))
    if submission_id is not None:
        body["submission_id"] = submission_id
    return body


def record(client: Agent, attempt_id: str, body: dict[str, Any]) -> str:
    """Send the summary; what happened, in words (never raises). Refused for a secret (a host
    name, a model name or a push error can quote the agent): sent again with the counts only."""

    def bare(note: str) -> dict[str, Any]:
        left = {k: v for k, v in body.items() if k not in _AGENT_TEXT}
        return {**left, "unusual": [], "ended": None, "note": note}

    try:
        said = artifacts.send(client, attempt_id, "launch_log", body, bare)
    except (AgentcError, OSError) as exc:  # never stops the settling
        return f"the launch log was not recorded: {exc}"
    if said == "exists":
        return "the launch log was recorded before"
    if said is not None:
        return f"recorded the launch log's counts without its text: {said}"
    return f"recorded the launch log ({body.get('events', 0)} events)"
