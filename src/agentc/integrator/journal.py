"""The integrator's journal: one small file per integration activity, the step it reached.

Each file (``journal/<activity id>.json``) is replaced atomically and durably
(:func:`agentc.files.write_atomic`) *before* the step it names has effects outside the
integrator, so a crash at any point leaves a file that says what may have happened:

- ``checked``: the checks passed on ``result_revision`` built on ``target_before``;
- ``pushing``: the compare-and-swap push of ``result_revision`` over ``target_before`` may
  have happened (the remote decides: see :mod:`agentc.integrator.engine`);
- ``recorded``: the coordinator holds the landing;
- ``rejected`` / ``target_red``: the candidate (or the target itself) did not pass on
  ``target_before``; tried again only once the target moves.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from agentc.core.errors import AgentcError
from agentc.files import write_atomic


class Step(StrEnum):
    """The step an integration activity reached (the module's docstring says what each means)."""

    CHECKED = "checked"
    PUSHING = "pushing"
    RECORDED = "recorded"
    REJECTED = "rejected"
    TARGET_RED = "target_red"


_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class JournalError(AgentcError):
    """A journal file is unreadable or malformed."""


@dataclass(frozen=True)
class Entry:
    activity_id: str
    task_id: str
    submission_id: str
    candidate_revision: str
    target_before: str
    step: Step
    result_revision: str | None = None
    reason: str | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    reviewed_diff: str | None = None  # the Agentc-Reviewed-Diff of the change it lands

    def at(self, step: Step, **changes: Any) -> Entry:
        return replace(self, step=Step(step), **changes)


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _path(self, activity_id: str) -> Path:
        if not _ID.match(activity_id):
            raise JournalError(f"activity id {activity_id!r} is not a journal file name")
        return self.directory / f"{activity_id}.json"

    def save(self, entry: Entry) -> Entry:
        data = json.dumps(asdict(entry), sort_keys=True, indent=1).encode() + b"\n"
        write_atomic(self._path(entry.activity_id), data)
        return entry

    def load(self, activity_id: str) -> Entry | None:
        path = self._path(activity_id)
        try:
            raw = json.loads(path.read_bytes())
            entry = Entry(**raw)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            raise JournalError(f"{path}: not a journal entry ({exc})") from None
        try:
            return replace(entry, step=Step(entry.step))
        except ValueError:
            raise JournalError(f"{path}: unknown step {entry.step!r}") from None

    def entries(self) -> list[Entry]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            entry = self.load(path.stem)
            if entry is not None:
                found.append(entry)
        return found
