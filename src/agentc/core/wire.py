"""The request shapes both sides of the coordinator API write: defined once, with their limits.

The service validates its request bodies with these models (`agentc.service.schemas` builds
the rest of its bodies from the same field types) and the MCP adapter types its tool arguments
with them, so an agent's submission or review is refused with the same rule on either side.
Unknown fields are refused and types are strict; a field holding one of the work model's names
(`agentc.core.model`) takes the name as a string and yields the enum.

This module needs pydantic: the supervisor's launch path must never import it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, model_validator

from agentc.core import model as m
from agentc.core.rules import ID_PATTERN, finding_place_problem

NO_NUL = r"^[^\x00]*$"
"""Text holds no NUL character (PostgreSQL's text cannot store one)."""


def text(max_length: int, *, min_length: int = 0) -> StringConstraints:
    """The constraint of a text field: at most `max_length` characters (at least `min_length`),
    none of them NUL."""
    return StringConstraints(min_length=min_length or None, max_length=max_length, pattern=NO_NUL)


Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
# Revisions and generations are counters the database stores as 64-bit integers.
Counter = Annotated[int, Field(ge=0, le=m.COUNTER_MAX)]
Revision = Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")]
Summary = Annotated[str, text(8192, min_length=1)]
Handoff = Annotated[str, text(16384)]
Criterion = Annotated[str, text(2048, min_length=1)]
Criteria = Annotated[list[Criterion], Field(min_length=m.CRITERIA_MIN, max_length=m.CRITERIA_MAX)]

E = TypeVar("E", bound=StrEnum)
# An enum field given by its value, a string (strict mode alone would want an enum instance).
ByValue = Annotated[E, Strict(False)]


class Body(BaseModel):
    """A request body: unknown fields are refused and types are strict."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Evidence(Body):
    criterion: Criterion
    evidence: Summary


class Amendment(Body):
    new: Criteria
    rationale: Summary


class Submission(Body):
    """What an agent submits for its attempt (the service's body adds the generation)."""

    kind: ByValue[m.TaskKind]
    summary: Summary
    acceptance_evidence: Annotated[list[Evidence], Field(min_length=1, max_length=100)]
    handoff: Handoff = ""
    candidate_ref: Annotated[str, text(512)] | None = None
    candidate_revision: Revision | None = None
    base_revision: Revision | None = None
    ac_amendment: Amendment | None = None


LineNumber = Annotated[int, Field(ge=1, le=m.COUNTER_MAX)]


class Finding(Body):
    """A reviewer's finding; with ``path`` (a file of the submission's change, its new name)
    and optionally ``line`` to ``end_line`` (that file's lines after the change; a deleted
    file's, before it), it is about those lines (the console shows it on them)."""

    severity: ByValue[m.Severity]
    remedy: Summary
    evidence: Annotated[str, text(8192)] = ""
    path: Annotated[str, text(m.FINDING_PATH_MAX, min_length=1)] | None = None
    line: LineNumber | None = None
    end_line: LineNumber | None = None

    @model_validator(mode="after")
    def _placed(self) -> Finding:
        problem = finding_place_problem(self.path, self.line, self.end_line)
        if problem:
            raise ValueError(problem)
        return self


class Review(Body):
    """A reviewer's decision (the service's body adds the generation and the submission)."""

    decision: ByValue[m.Decision]
    summary: Annotated[str, text(16384, min_length=1)]
    findings: Annotated[list[Finding], Field(max_length=100)] = []
    amendment_decision: ByValue[m.AmendmentDecision] | None = None
