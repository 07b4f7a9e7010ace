"""The message of every commit the integrator makes: the task's title, one sentence, trailers.

The trailers name what was reviewed, so anyone can check a landing later::

    Agentc-Task: <task id>
    Agentc-Submission: <submission id>
    Agentc-Activity: <integration activity id>
    Agentc-Candidate: <the reviewed candidate revision>
    Agentc-Base: <the base revision it was reviewed against>
    Agentc-Reviewed-Diff: sha256:<SHA-256 of `git diff-tree -r -z --no-renames <base> <candidate>`>

The title is the one thing in the message an agent may have written: only its first line is
used, control characters removed, at most ``TITLE_MAX`` characters, so it can never add a
paragraph (or a trailer) of its own.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from agentc.core.rules import is_id

TITLE_MAX = 100
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def reviewed_diff(raw: bytes) -> str:
    """The ``Agentc-Reviewed-Diff`` value of the raw diff ``raw``."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def title_line(title: str, task_id: str) -> str:
    """The first line of ``title``, printable, bounded; a title that leaves nothing is
    replaced by the task's id."""
    first = _BREAK.split(title, maxsplit=1)[0]
    text = " ".join(_CONTROL.sub(" ", first).split())
    if len(text) > TITLE_MAX:
        text = text[: TITLE_MAX - 1].rstrip() + "…"
    return text or f"agentc task {task_id}"


@dataclass(frozen=True)
class Provenance:
    """What a landing lands: the ids the coordinator gave and the revisions reviewed."""

    task_id: str
    submission_id: str
    activity_id: str
    candidate: str
    base: str
    reviewed_diff: str

    def __post_init__(self) -> None:
        for name in ("task_id", "submission_id", "activity_id"):
            if not is_id(getattr(self, name)):  # visible ASCII: no line can be added
                raise ValueError(f"{name} is not an id")

    def trailers(self) -> dict[str, str]:
        return {
            "Agentc-Task": self.task_id,
            "Agentc-Submission": self.submission_id,
            "Agentc-Activity": self.activity_id,
            "Agentc-Candidate": self.candidate,
            "Agentc-Base": self.base,
            "Agentc-Reviewed-Diff": self.reviewed_diff,
        }


ONE_COMMIT = "The change reviewed for this task, as one commit on the revision it was reviewed on."
PUT_ON_TARGET = (
    "The change reviewed for this task, put on the current target as one commit: its diff "
    "against its parent is the reviewed diff."
)
MERGE = (
    "Merges the change reviewed for this task; the second parent is that change as one commit "
    "on the revision it was reviewed on."
)


def message(title: str, sentence: str, provenance: Provenance) -> str:
    trailers = "\n".join(f"{key}: {value}" for key, value in provenance.trailers().items())
    return f"{title_line(title, provenance.task_id)}\n\n{sentence}\n\n{trailers}\n"
