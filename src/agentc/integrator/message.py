"""The message of every commit the integrator makes: the task's title, one sentence, trailers.

The trailers name what was reviewed and how it was made, so anyone can check a landing later
(docs/integrator.md, "Provenance trailers")::

    Agentc-Task: <task id>
    Agentc-Attempt: <the attempt that submitted the change>
    Agentc-Launch: <the launch that served it>            (each; "unrecorded" when none is)
    Agentc-Prompt: sha256:<hex of the prompt the launch was given>   (or "unrecorded")
    Agentc-Submission: <submission id>
    Agentc-Activity: <integration activity id>
    Agentc-Candidate: <the reviewed candidate revision>
    Agentc-Base: <the base revision it was reviewed against>
    Agentc-Reviewed-Diff: sha256:<SHA-256 of `git diff-tree -r -z --no-renames <base> <candidate>`>
    Agentc-Review: <verdict> by <reviewer> (<kind> <principal id>)   (each review)
    Agentc-Scan: passed | held for a person, then approved       (the pre-landing scan)
    Agentc-Check: <name> <outcome> exit=<status> ms=<duration>       (each required check;
                  ... flaky=first failed (exit 1)   when it passed only when run again)
    Agentc-Harness: <harness>                                      (each, from the cost ledger)
    Agentc-Model: <model>                                          (each, from the cost ledger)

Values an agent may have chosen (a model's name, a session id, a reviewer's name) are hostile:
every value goes through :func:`trailer_value`, the one quoting rule, which keeps it on its own
line. The title is the other text an agent may have written: only its first line is used,
without control or format characters, at most ``TITLE_MAX`` characters, so it can never add a
paragraph (or a trailer) of its own.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agentc.core.rules import is_id

TITLE_MAX = 100
VALUE_MAX = 200
UNRECORDED = "unrecorded"
_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
_HIDDEN_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")
CUT = "%E2%80%A6"  # an ellipsis, quoted: the end of a value cut at VALUE_MAX characters


def reviewed_diff(raw: bytes) -> str:
    """The ``Agentc-Reviewed-Diff`` value of the raw diff ``raw``."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _shown(ch: str) -> bool:
    return unicodedata.category(ch) not in _HIDDEN_CATEGORIES


def title_line(title: str, task_id: str) -> str:
    """The first line of ``title``, without control or format characters (bidirectional
    controls, tag characters, zero-width ones), bounded; a title that leaves nothing is
    replaced by the task's id."""
    first = _BREAK.split(title, maxsplit=1)[0]
    text = " ".join("".join(ch if _shown(ch) else " " for ch in first).split())
    if len(text) > TITLE_MAX:
        text = text[: TITLE_MAX - 1].rstrip() + "…"
    return text or f"agentc task {task_id}"


def trailer_value(text: str) -> str:
    """Any text as one trailer's value, the one quoting rule: visible ASCII (but ``%``) and
    inner single spaces stay; every other character (a line break, a control or format
    character, any non-ASCII, ``%`` itself, a space at either end or after another) becomes
    the ``%XX`` escapes of its UTF-8 bytes. So a value is one line of visible ASCII that
    cannot end its line, start another trailer, or hide text; past ``VALUE_MAX`` characters it
    is cut and ends with ``%E2%80%A6``. The empty text is ``-``."""
    cut = len(text) > VALUE_MAX
    out: list[str] = []
    for index, ch in enumerate(text[:VALUE_MAX]):
        plain = "\x21" <= ch <= "\x7e" and ch != "%"
        inner_space = ch == " " and 0 < index < len(text) - 1 and out[-1] != " "
        if plain or inner_space:
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
    if out and out[-1] == " ":  # a space git would trim (the text was cut after it)
        out[-1] = "%20"
    return ("".join(out) + (CUT if cut else "")) or "-"


@dataclass(frozen=True)
class Review:
    decision: str
    reviewer: str
    reviewer_id: str
    kind: str

    def line(self) -> str:
        return f"{self.decision} by {self.reviewer} ({self.kind} {self.reviewer_id})"


@dataclass(frozen=True)
class Served:
    """What the coordinator knows of how the change was made and approved (its provenance
    read, ``GET …/workflow-activities/{a}/provenance``)."""

    attempt_id: str
    launches: tuple[str, ...] = ()
    prompt_sha256: str | None = None
    harnesses: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    reviews: tuple[Review, ...] = ()

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Served:
        """The provenance answer, read defensively (a field of the wrong type is left out)."""
        ledger = data.get("ledger")
        if not isinstance(ledger, dict):
            ledger = {}

        def texts(values: object) -> tuple[str, ...]:
            items = values if isinstance(values, list) else []
            return tuple(dict.fromkeys(v for v in items if isinstance(v, str) and v))

        launch = data.get("launch_id")
        reviews = [r for r in data.get("reviews") or [] if isinstance(r, dict)]
        prompt = data.get("prompt_sha256")
        return cls(
            attempt_id=str(data.get("attempt_id") or ""),
            launches=texts([launch, *(ledger.get("launches") or [])]),
            prompt_sha256=prompt if isinstance(prompt, str) and prompt else None,
            harnesses=texts(ledger.get("harnesses")),
            models=texts(ledger.get("models")),
            reviews=tuple(
                Review(
                    str(r.get("decision") or ""),
                    str(r.get("reviewer_name") or r.get("reviewer_id") or ""),
                    str(r.get("reviewer_id") or ""),
                    str(r.get("reviewer_kind") or ""),
                )
                for r in reviews
            ),
        )


def check_line(record: Mapping[str, Any]) -> str:
    """A check's result as its trailer says it: ``<name> <outcome> exit=<status> ms=<ms>``."""
    line = f"{record.get('name')} {record.get('outcome')} exit={record.get('exit_code')}"
    took = record.get("duration_ms")
    line += f" ms={took}" if isinstance(took, int) else ""
    return line + (f" flaky=first {record.get('first')}" if record.get("flaky") else "")


@dataclass(frozen=True)
class Provenance:
    """What a landing lands: the ids the coordinator gave, the revisions reviewed, how the
    change was made (``served``) and the checks that passed on it (``checks``: their trailer
    lines, added once they ran)."""

    task_id: str
    submission_id: str
    activity_id: str
    candidate: str
    base: str
    reviewed_diff: str
    served: Served | None = None
    checks: tuple[str, ...] = field(default=())
    scanned: str = ""  # the pre-landing scan's verdict

    def __post_init__(self) -> None:
        for name in ("task_id", "submission_id", "activity_id"):
            if not is_id(getattr(self, name)):  # visible ASCII: no line can be added
                raise ValueError(f"{name} is not an id")

    def with_checks(self, records: Sequence[Mapping[str, Any]]) -> Provenance:
        return replace(self, checks=tuple(check_line(r) for r in records))

    def trailers(self) -> list[tuple[str, str]]:
        """The trailers, in order (a key may repeat), each value quoted by the one rule."""
        served = self.served or Served("")
        prompt = served.prompt_sha256
        pairs = [
            ("Agentc-Task", self.task_id),
            ("Agentc-Attempt", served.attempt_id or UNRECORDED),
            *(("Agentc-Launch", v) for v in served.launches or (UNRECORDED,)),
            ("Agentc-Prompt", f"sha256:{prompt}" if prompt else UNRECORDED),
            ("Agentc-Submission", self.submission_id),
            ("Agentc-Activity", self.activity_id),
            ("Agentc-Candidate", self.candidate),
            ("Agentc-Base", self.base),
            ("Agentc-Reviewed-Diff", self.reviewed_diff),
            *(("Agentc-Review", r.line()) for r in served.reviews),
            ("Agentc-Scan", self.scanned or UNRECORDED),
            *(("Agentc-Check", line) for line in self.checks),
            *(("Agentc-Harness", v) for v in served.harnesses or (UNRECORDED,)),
            *(("Agentc-Model", v) for v in served.models or (UNRECORDED,)),
        ]
        return [(key, trailer_value(value)) for key, value in pairs]


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
    trailers = "\n".join(f"{key}: {value}" for key, value in provenance.trailers())
    return f"{title_line(title, provenance.task_id)}\n\n{sentence}\n\n{trailers}\n"
