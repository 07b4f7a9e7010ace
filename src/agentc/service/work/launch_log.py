"""A launch's event log summary (docs/gateway.md "The launch's event log", decision D47): what
the implementer's launch did besides its diff, as the host recorded it outside the sandbox.

The supervisor that ran the attempt reads the launch's event log (model calls from the gateway,
connections from the egress proxy, its own record of the end and the pushes) when it settles
the attempt, and records the summary here, like the steps (:mod:`.steps`): only the attempt's
own agent with its role's credential (a launch's attempt credential has no such route), once.
The reviewer's claim of the submission carries it (``launch_log``), and the console's change
page shows it. Host names, refusal reasons and push errors may quote the agent: the body passes
the secret screen like any text and is shown escaped.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy.engine import Connection

from agentc.core.wire import Body, Id, text
from agentc.service.ops import Op, Result
from agentc.service.work.artifacts import keep, own_attempt
from agentc.service.work.refusals import missing
from agentc.store import artifacts
from agentc.store.sql import fetch_row
from agentc.store.workflow import Submission

KIND = "launch_log"
LIST_MAX = 20
Count = Annotated[int, Field(ge=0, le=1 << 62)]
Port = Annotated[int, Field(ge=0, le=65535)]
Word = Annotated[str, text(200)]
Line = Annotated[str, text(1000)]


class Host(Body):
    host: Annotated[str, text(255)] | None = None
    port: Port | None = None
    connections: Count = 0
    bytes_up: Count = 0
    bytes_down: Count = 0


class Denied(Body):
    host: Annotated[str, text(255)] | None = None
    port: Port | None = None
    reason: Line | None = None
    count: Count = 0


class Push(Body):
    ok: bool | None = None
    ref: Line | None = None
    error: Line | None = None


class Stop(Body):
    kind: Word
    name: Word
    reason: Line = ""


class Ended(Body):
    exit_code: Annotated[int, Field(ge=-(1 << 31), le=1 << 32)] | None = None
    signal: Word | None = None
    limit: Word | None = None
    cap: Word | None = None
    stop: Stop | None = None
    killed: Annotated[dict[Word, Count], Field(max_length=50)] | None = None
    stopped_by: Annotated[str, text(2000)] | None = None


class LaunchLogIn(Body):
    """The summary (agentc.files.launchlog.summarize) and the submission it goes with."""

    submission_id: Id | None = None
    events: Count = 0
    model_calls: Count = 0
    usd: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False, strict=False)] = 0.0
    input_tokens: Count = 0
    output_tokens: Count = 0
    models: Annotated[list[Word], Field(max_length=LIST_MAX)] = []
    refused_calls: Annotated[dict[Word, Count], Field(max_length=LIST_MAX)] = {}
    hosts: Annotated[list[Host], Field(max_length=LIST_MAX)] = []
    denied: Annotated[list[Denied], Field(max_length=LIST_MAX)] = []
    pushes: Annotated[list[Push], Field(max_length=LIST_MAX)] = []
    ended: Ended | None = None
    unusual: Annotated[list[Line], Field(max_length=40)] = []
    note: Line = ""  # why parts are left out (a secret refusal)


def record_launch_log(op: Op, project_id: str, attempt_id: str, body: LaunchLogIn) -> Result:
    """Keep the settled attempt's launch log summary (once; the same again is a replay)."""
    attempt = own_attempt(op, project_id, attempt_id, KIND)
    if body.submission_id is not None:
        sub = fetch_row(op.conn, Submission, body.submission_id)
        if sub is None or sub.attempt_id != attempt_id:
            raise missing(f"attempt {attempt_id} made no submission {body.submission_id}")
    data = body.model_dump(exclude={"submission_id"})
    row = keep(
        op, attempt, KIND, data, body.submission_id, events=body.events,
        unusual=len(body.unusual),
    )  # fmt: skip
    return Result({"id": row.id, "kind": KIND}, status=201)


def of_attempt(conn: Connection, attempt_id: str) -> dict[str, Any] | None:
    """The attempt's launch log summary, or None when none was recorded."""
    row = artifacts.of_attempt(conn, attempt_id, KIND)
    if row is None:
        return None
    body: dict[str, Any] = json.loads(row.body_json)
    return {"recorded_at_ms": row.created_at, "submission_id": row.submission_id, **body}


def read_launch_log(conn: Connection, project_id: str, attempt_id: str) -> dict[str, Any]:
    """``GET .../attempts/{a}/artifacts/launch-log`` (404 when none was recorded)."""
    row = artifacts.of_attempt(conn, attempt_id, KIND)
    if row is None or row.project_id != project_id:
        raise missing(f"attempt {attempt_id} has no recorded launch log")
    found = of_attempt(conn, attempt_id)
    assert found is not None
    return {"attempt_id": attempt_id, **found}
