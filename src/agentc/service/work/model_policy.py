"""Model policies (docs/gateway.md "Model policy", decision D47): which models a project's or a
task's launches may call, the output tokens per call, the turns and dollars per attempt.

People set them (admins: :func:`agentc.service.auth.require_admin`, so never an agent's or a
launch's credential); the rule that decides lives in :mod:`agentc.core.model_policy`, which
validates here and decides at the gateway. The loop reads a task's ``effective`` policy after
its claim and hands it to the gateway with the launch's sentinel. Each level is replaced whole
(PUT) at an expected revision (0: none yet); a field left null is not set at that level (for a
task: the project's value holds; for a project: no limit).
"""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import Field
from sqlalchemy.engine import Connection

from agentc.core import model_policy as mp
from agentc.core.model_policy import ModelPolicy
from agentc.core.wire import Body, Counter, text
from agentc.service.auth import require_admin
from agentc.service.ops import JsonObject, Op, Result
from agentc.service.work.refusals import conflict, invalid
from agentc.service.work.views import project_row, task_row
from agentc.store import model_policies
from agentc.store.model_policies import PolicyRow
from agentc.store.projects import Project
from agentc.store.tasks import Task
from agentc.store.tx import Tx

Pattern = Annotated[str, text(mp.PATTERN_MAX, min_length=1)]


class ModelPolicyIn(Body):
    expected_revision: Counter
    allowed_models: Annotated[list[Pattern], Field(max_length=mp.PATTERNS_MAX)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1, le=mp.OUTPUT_TOKENS_MAX)] | None = None
    max_turns: Annotated[int, Field(ge=1, le=mp.TURNS_MAX)] | None = None
    max_usd: (
        Annotated[float, Field(ge=mp.USD_MIN, le=mp.USD_MAX, allow_inf_nan=False, strict=False)]
        | None
    ) = None

    def policy(self) -> ModelPolicy:
        """The policy given, checked by the one rule (a bad pattern is named)."""
        wire = self.model_dump(exclude={"expected_revision"})
        found = mp.problems(wire)
        if found:
            raise invalid(found[0].split(":", 1)[0], found[0].split(": ", 1)[1])
        return mp.from_wire(wire)


def _stored(row: PolicyRow | None) -> ModelPolicy:
    return mp.from_wire(json.loads(row.policy_json)) if row is not None else ModelPolicy()


def _level(row: PolicyRow | None) -> JsonObject:
    """One level's policy as the API shows it (revision 0: never set)."""
    return {
        "policy": mp.to_wire(_stored(row)),
        "revision": row.revision if row else 0,
        "updated_by": row.updated_by if row else None,
        "updated_at_ms": row.updated_at if row else None,
    }


def project_policy(tx: Tx, project_id: str) -> JsonObject:
    """``GET /projects/{p}/model-policy``."""
    project_row(tx.conn, project_id)
    return {"project_id": project_id, **_level(model_policies.policy_of(tx.conn, project_id))}


def effective_of(conn: Connection, project_id: str, task_id: str) -> tuple[ModelPolicy, JsonObject]:
    """The task's effective policy, and what the API shows of both levels and the sources."""
    project = model_policies.policy_of(conn, project_id)
    task = model_policies.policy_of(conn, task_id)
    effective = mp.effective(_stored(project), _stored(task))
    return effective, {
        "project_id": project_id,
        "task_id": task_id,
        "project": _level(project),
        "task": _level(task),
        "effective": mp.to_wire(effective),
        "sources": mp.sources(_stored(project), _stored(task)),
    }


def task_policy(tx: Tx, project_id: str, task_id: str) -> JsonObject:
    """``GET /projects/{p}/tasks/{t}/model-policy``: both levels and the effective policy."""
    project_row(tx.conn, project_id)
    task_row(tx.conn, project_id, task_id)
    return effective_of(tx.conn, project_id, task_id)[1]


def _save(op: Op, project_id: str, task_id: str | None, body: ModelPolicyIn) -> PolicyRow:
    policy = body.policy()
    subject = task_id or project_id
    current = model_policies.policy_of(op.conn, subject)
    revision = current.revision if current else 0
    if body.expected_revision != revision:
        raise conflict(
            "revision_conflict",
            f"the model policy is at revision {revision}, not {body.expected_revision}",
            current_revision=revision,
        )
    wire = mp.to_wire(policy)
    row = PolicyRow(
        subject, project_id, task_id, json.dumps(wire), revision + 1, op.actor.principal_id, op.now
    )
    model_policies.save_policy(op.conn, row)
    op.event(
        "model_policy.updated", project_id, subject, task_id=task_id, revision=row.revision, **wire
    )
    return row


def set_project_policy(op: Op, project_id: str, body: ModelPolicyIn) -> Result:
    """``PUT /projects/{p}/model-policy`` (admins)."""
    require_admin(op.actor, "change a project's model policy")
    if op.tx.lock(Project, project_id) is None:  # serializes edits of the project's policy
        project_row(op.conn, project_id)  # raises project_not_found
    row = _save(op, project_id, None, body)
    return Result({"project_id": project_id, **_level(row)})


def set_task_policy(op: Op, project_id: str, task_id: str, body: ModelPolicyIn) -> Result:
    """``PUT /projects/{p}/tasks/{t}/model-policy`` (admins)."""
    require_admin(op.actor, "change a task's model policy")
    project_row(op.conn, project_id)
    task = op.tx.lock(Task, task_id)  # serializes edits of the task's policy
    if task is None or task.project_id != project_id:
        task_row(op.conn, project_id, task_id)  # raises record_not_found
    _save(op, project_id, task_id, body)
    return Result(effective_of(op.conn, project_id, task_id)[1])
