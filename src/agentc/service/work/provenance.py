"""A landing's provenance: what the integrator names in the trailers of the commit it lands
(docs/integrator.md, "Provenance trailers").

One read per integration activity gathers what only the coordinator knows: the attempt that
made the submission, the launch that served it and the SHA-256 of the prompt it was given (both
from the steps its supervisor recorded), the harnesses and models the cost ledger names for the
attempt (and the launches its rows came from), and each review of the submission with its
verdict and reviewer. Every value is returned as stored; names and models may be an agent's
text, so the integrator quotes each one by its one rule before it goes into a message.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Connection

from agentc.core.model import ActivityKind
from agentc.service.ops import JsonObject
from agentc.service.work.refusals import missing
from agentc.service.work.views import project_row
from agentc.store import artifacts, audit, workflow
from agentc.store.accounts import Principal
from agentc.store.sql import fetch_row
from agentc.store.workflow import Activity, Submission

COST_ROWS_READ = 200  # one launch reports one row; a person's session may report a few


def _strings(values: list[Any]) -> list[str]:
    """The distinct non-empty strings of ``values``, sorted (one answer for one ledger)."""
    return sorted({v for v in values if isinstance(v, str) and v})


def _ledger(conn: Connection, project_id: str, attempt_id: str) -> JsonObject:
    """The harnesses, models and launches the attempt's cost rows name."""
    harnesses: list[Any] = []
    models: list[Any] = []
    launches: list[Any] = []
    rows = audit.costs_of_attempt(conn, project_id, attempt_id, COST_ROWS_READ)
    for row in rows:
        data = json.loads(row.row_json)
        if not isinstance(data, dict):
            continue
        harnesses.append(data.get("upstream"))
        named = data.get("models")
        models.extend(named if isinstance(named, list) else [data.get("model")])
        launches.append(data.get("session_id"))
    return {
        "cost_rows": len(rows),
        "harnesses": _strings(harnesses),
        "models": _strings(models),
        "launches": _strings(launches),
    }


def _reviews(conn: Connection, submission_id: str) -> list[JsonObject]:
    decisions = sorted(
        workflow.decisions_of_submission(conn, submission_id), key=lambda d: (d.created_at, d.id)
    )
    found = []
    for d in decisions:
        who = fetch_row(conn, Principal, d.reviewer_id)
        found.append(
            {
                "activity_id": d.activity_id,
                "decision": d.decision,
                "reviewer_id": d.reviewer_id,
                "reviewer_name": who.name if who else None,
                "reviewer_kind": d.reviewer_kind,
            }
        )
    return found


def provenance(conn: Connection, project_id: str, activity_id: str) -> JsonObject:
    """``GET …/workflow-activities/{a}/provenance`` of an integration activity."""
    project_row(conn, project_id)
    act = fetch_row(conn, Activity, activity_id)
    if act is None or act.project_id != project_id or act.kind != ActivityKind.INTEGRATION:
        raise missing(f"no integration activity {activity_id}")
    sub = fetch_row(conn, Submission, act.submission_id)
    assert sub is not None
    steps = artifacts.of_attempt(conn, sub.attempt_id, "steps")
    run = json.loads(steps.body_json) if steps else {}
    return {
        "activity_id": act.id,
        "task_id": act.task_id,
        "submission_id": sub.id,
        "attempt_id": sub.attempt_id,
        "candidate_revision": sub.candidate_revision,
        "base_revision": sub.base_revision,
        "launch_id": run.get("launch_id"),
        "prompt_sha256": run.get("prompt_sha256"),
        "ledger": _ledger(conn, project_id, sub.attempt_id),
        "reviews": _reviews(conn, sub.id),
    }
