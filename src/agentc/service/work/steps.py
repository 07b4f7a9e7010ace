"""An attempt's steps (docs/console.md "What the agent did", decision D45): what the agent did,
as its harness's event stream tells it, with the attempt's cost and tokens, its duration and
how it ended, recorded by the supervisor that ran it when the attempt is settled.

Like the patch (:mod:`.artifacts`), only the attempt's own agent records them, with its role's
credential (an attempt credential, what a launch holds, has no such route), once per attempt.
The steps are agent text: bounded here and by the supervisor (``steps_max_kib``), screened by
the mutation screen like any body (on a refusal the supervisor sends the numbers and the ending
without the steps, saying why), and shown escaped only.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints
from sqlalchemy.engine import Connection

from agentc.core import model as m
from agentc.core.wire import Body, Id, text
from agentc.service.ops import Op, Result
from agentc.service.work.artifacts import keep, own_attempt
from agentc.service.work.refusals import missing
from agentc.store import artifacts
from agentc.store.artifacts import Artifact

STEPS_MAX = 500  # the harness parsers keep the first 500 (supervisor.harness.stream.MAX_STEPS)
Count = Annotated[int, Field(ge=0, le=1 << 62)]


class StepIn(Body):
    """One thing the agent did: a model's message, a tool call (with its result and exit
    status when the stream told them), a file written, an error."""

    kind: Literal["model", "tool", "file", "error"]
    name: Annotated[str, text(100, min_length=1)]
    detail: Annotated[str, text(2000)] = ""
    ok: bool | None = None
    exit_code: Annotated[int, Field(ge=m.STEP_EXIT_MIN, le=m.STEP_EXIT_MAX)] | None = None


class StepsIn(Body):
    harness: Annotated[str, text(200, min_length=1)]
    model: Annotated[str, text(200)] | None = None
    steps: Annotated[list[StepIn], Field(max_length=STEPS_MAX)] | None = None  # None: withheld
    steps_dropped: Count = 0  # steps the stream told past the bound (counted, not kept)
    ending: m.RunEnding
    why: Annotated[str, text(2000)] = ""  # the supervisor's words for the ending
    error: Annotated[str, text(2000)] | None = None  # the harness's own error, if it said one
    started_at_ms: Count | None = None  # None: the launch never started
    duration_ms: Count = 0
    usd: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] | None = None
    usd_estimated: bool = False
    input_tokens: Count = 0
    cached_input_tokens: Count = 0
    output_tokens: Count = 0
    note: Annotated[str, text(1000)] = ""  # why the steps are withheld
    # Which launch served the attempt and the SHA-256 of the prompt it was given (the
    # supervisor's own values: a landing's provenance names them).
    launch_id: Id | None = None
    prompt_sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = None


def record_steps(op: Op, project_id: str, attempt_id: str, body: StepsIn) -> Result:
    """Keep the settled attempt's steps (once; the same again is a replay)."""
    attempt = own_attempt(op, project_id, attempt_id, "steps")
    row = keep(
        op, attempt, "steps", body.model_dump(), ending=body.ending,
        steps=len(body.steps or ()), withheld=body.steps is None,
    )  # fmt: skip
    return Result({"id": row.id, "kind": "steps", "ending": body.ending}, status=201)


def steps_view(row: Artifact) -> dict[str, Any]:
    """Recorded steps as the API and the console read them."""
    body: dict[str, Any] = json.loads(row.body_json)
    tools = [s for s in body.get("steps") or () if s.get("kind") in ("tool", "file")]
    return {
        "id": row.id,
        "attempt_id": row.attempt_id,
        "recorded_at_ms": row.created_at,
        **body,
        "counts": {
            "steps": len(body.get("steps") or ()) + int(body.get("steps_dropped") or 0),
            "tool_calls": len(tools),
            "failed": sum(1 for s in tools if s.get("ok") is False),
        },
    }


def read_steps(conn: Connection, project_id: str, attempt_id: str) -> dict[str, Any]:
    """The attempt's steps (404 when none were recorded)."""
    row = artifacts.of_attempt(conn, attempt_id, "steps")
    if row is None or row.project_id != project_id:
        raise missing(f"attempt {attempt_id} has no recorded steps")
    return steps_view(row)


def of_task(conn: Connection, task_id: str) -> dict[str, dict[str, Any]]:
    """The recorded steps of the task's attempts, by attempt id."""
    rows = artifacts.of_task_kind(conn, task_id, "steps")
    return {row.attempt_id: steps_view(row) for row in rows}
