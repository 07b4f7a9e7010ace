"""Claims, leases, checkpoints and releases; `next`.

The generation is the fencing token: every attempt-scoped write presents it, and a write from
an attempt that is no longer the task's current one is refused.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from agentc.core import lease
from agentc.core.errors import CoordinatorError
from agentc.core.model import AttemptMode, AttemptState, Lifecycle, Phase, WorkStatus
from agentc.core.rules import rfc3339
from agentc.core.status import AttemptFacts, TaskFacts, work_status
from agentc.service.api import Op, Result, new_id
from agentc.service.auth import Actor, require_agent_session
from agentc.service.schemas import CheckoutIn, CheckpointIn, ClaimIn, GenerationIn, ReleaseIn
from agentc.service.work.views import (
    attempt_view,
    project_row,
    task_facts,
    task_row,
    task_view,
)
from agentc.store.schema import (
    agent_sessions,
    attempts,
    checkouts,
    checkpoints,
    credentials,
    principals,
    task_contributors,
    task_dependencies,
    tasks,
)

_prereq = tasks.alias("prereq")

NEXT_SCAN = 50


_blocking_prerequisite = (
    select(task_dependencies.c.task_id)
    .join(_prereq, _prereq.c.id == task_dependencies.c.prerequisite_id)
    .where(task_dependencies.c.task_id == tasks.c.id, _prereq.c.lifecycle != Lifecycle.DONE)
    .exists()
)

# One query for `next`: open tasks outside review and integration with no blocking
# prerequisite, each with its current attempt and whether that attempt's owner still holds
# its credential and session; the pure status rule then picks recovery first, then ready.
_OFFER = (
    select(
        tasks,
        attempts.c.state.label("attempt_state"),
        attempts.c.expires_at.label("attempt_expires_at"),
        principals.c.disabled_at.label("owner_disabled_at"),
        credentials.c.revoked_at.label("owner_revoked_at"),
        agent_sessions.c.closed_at.label("owner_closed_at"),
    )
    .outerjoin(attempts, attempts.c.id == tasks.c.current_attempt_id)
    .outerjoin(principals, principals.c.id == attempts.c.owner_id)
    .outerjoin(credentials, credentials.c.id == attempts.c.credential_id)
    .outerjoin(agent_sessions, agent_sessions.c.id == attempts.c.session_id)
    .where(
        tasks.c.project_id == bindparam("project_id"),
        tasks.c.lifecycle == Lifecycle.OPEN,
        tasks.c.blocked_reason.is_(None),
        (tasks.c.phase.is_(None)) | (tasks.c.phase == Phase.REVISION_NEEDED),
        ~_blocking_prerequisite,
        # Skip tasks whose current attempt still holds its lease: they are not on offer.
        attempts.c.id.is_(None)
        | (attempts.c.state != AttemptState.ACTIVE)
        | (attempts.c.expires_at <= bindparam("now"))
        | principals.c.disabled_at.is_not(None)
        | credentials.c.revoked_at.is_not(None)
        | agent_sessions.c.closed_at.is_not(None),
    )
    .order_by(tasks.c.priority, tasks.c.ready_since, tasks.c.id)
    .limit(bindparam("limit"))
)


def _offer_status(row: Row[Any], now: int) -> WorkStatus:
    attempt = None
    if row.current_attempt_id is not None and row.attempt_state is not None:
        authorized = (
            row.owner_disabled_at is None
            and row.owner_revoked_at is None
            and row.owner_closed_at is None
        )
        attempt = AttemptFacts(row.attempt_state, row.attempt_expires_at, authorized)
    return work_status(TaskFacts(row.lifecycle, row.phase, row.blocked_reason, attempt, True), now)


def next_action(conn: Connection, project_id: str, now: int, actor: Actor) -> dict[str, Any]:
    """At most one suggested claim: recoverable work first, then ready work. Read only."""
    project_row(conn, project_id)
    rows = conn.execute(_OFFER, {"project_id": project_id, "limit": NEXT_SCAN, "now": now}).all()
    statuses = [(r, _offer_status(r, now)) for r in rows]
    chosen: tuple[Row[Any], WorkStatus] | None = next(
        ((r, s) for r, s in statuses if s == WorkStatus.RECOVERY_REQUIRED), None
    ) or next(((r, s) for r, s in statuses if s == WorkStatus.READY), None)
    if chosen is None:
        return {
            "role": "implementer",
            "action": None,
            "inspected": len(rows),
            "retry_after_seconds": 30,
        }
    row, status = chosen
    return {
        "role": "implementer",
        "action": {
            "kind": "recover_task" if status == WorkStatus.RECOVERY_REQUIRED else "claim_task",
            "task_id": row.id,
            "task_kind": row.kind,
            "title": row.title,
            "priority": row.priority,
            "task_revision": row.revision,
            "call": {
                "method": "POST",
                "path": f"/api/v1/projects/{project_id}/claims",
                "body": {"task_id": row.id, "expected_task_revision": row.revision},
            },
        },
        "inspected": len(rows),
        "retry_after_seconds": 0,
    }


CLAIMABLE = (WorkStatus.READY, WorkStatus.RECOVERY_REQUIRED)


def _next_claimable(op: Op, project_id: str) -> tuple[Row[Any], WorkStatus] | None:
    """The first task on offer that this transaction can take: recovery first, then ready.
    On PostgreSQL a candidate another claim has locked is skipped, not waited for, so
    concurrent queue claims spread over the tasks instead of colliding on the first."""
    rows = op.conn.execute(
        _OFFER, {"project_id": project_id, "limit": NEXT_SCAN, "now": op.now}
    ).all()
    offered = [(r, _offer_status(r, op.now)) for r in rows]
    ordered = [r for r, s in offered if s == WorkStatus.RECOVERY_REQUIRED] + [
        r for r, s in offered if s == WorkStatus.READY
    ]
    for candidate in ordered:
        row = op.tx.lock(tasks, candidate.id, skip_locked=True)
        if row is None:
            continue
        status = work_status(task_facts(op.conn, row), op.now)
        if status in CLAIMABLE:
            return row, status
    return None


def claim(op: Op, project_id: str, body: ClaimIn) -> Result:
    session_id = require_agent_session(op.actor)
    project = project_row(op.conn, project_id)
    if (body.task_id is None) != (body.expected_task_revision is None):
        raise CoordinatorError(
            "invalid_input",
            "task_id and expected_task_revision go together (or neither, to "
            "claim the next ready task)",
            status=422,
            details={"field": "task_id"},
        )
    if body.task_id is None:
        found = _next_claimable(op, project_id)
        if found is None:
            op.event("claim.empty", project_id, None)
            return Result({"claim": None, "reasons": ["no ready task"], "retry_after_seconds": 30})
        row, status = found
        task_id = row.id
    else:
        task_id = body.task_id
        locked = op.tx.lock(tasks, task_id)
        if locked is None or locked.project_id != project_id:
            raise CoordinatorError("record_not_found", f"no task {task_id}", status=404)
        row = locked
        if row.revision != body.expected_task_revision:
            raise CoordinatorError(
                "revision_conflict",
                f"the task is at revision {row.revision}, not {body.expected_task_revision}",
                status=409,
                details={"current_revision": row.revision},
            )
        status = work_status(task_facts(op.conn, row), op.now)
        if status not in CLAIMABLE:
            raise CoordinatorError(
                "claim_conflict",
                f"the task is {status.value}, not ready",
                status=409,
                details={"task": {"id": row.id, "work_status": status.value}},
            )
    previous = None
    if status == WorkStatus.RECOVERY_REQUIRED:
        previous = op.conn.execute(
            select(attempts).where(attempts.c.id == row.current_attempt_id)
        ).first()
        op.conn.execute(
            update(attempts)
            .where(attempts.c.id == row.current_attempt_id)
            .values(
                state=AttemptState.EXPIRED,
                ended_at=op.now,
                outcome="lease lapsed; taken over by a recovery claim",
            )
        )
    attempt_id = new_id()
    generation = row.generation + 1
    expires = lease.renewed_expiry(
        op.now, project.lease_seconds, op.now, project.max_attempt_seconds
    )
    mode = AttemptMode.RECOVERY if previous is not None else AttemptMode.WORK
    try:
        with op.tx.savepoint_if_concurrent():
            op.conn.execute(
                insert(attempts).values(
                    id=attempt_id,
                    project_id=project_id,
                    task_id=task_id,
                    owner_id=op.actor.principal_id,
                    session_id=session_id,
                    credential_id=op.actor.credential_id,
                    generation=generation,
                    state=AttemptState.ACTIVE,
                    mode=mode,
                    task_revision=row.revision,
                    policy_revision=project.policy_revision,
                    expires_at=expires,
                    last_heartbeat_at=op.now,
                    last_progress_at=op.now,
                    created_at=op.now,
                )
            )
    except IntegrityError as exc:  # another claim won the race
        raise CoordinatorError(
            "claim_conflict", "the task was claimed concurrently", status=409
        ) from exc
    op.conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(generation=generation, current_attempt_id=attempt_id, updated_at=op.now)
    )
    contribute(op, task_id, session_id)
    op.event(
        "attempt.claimed", project_id, attempt_id, task_id=task_id, generation=generation, mode=mode
    )
    att = op.conn.execute(select(attempts).where(attempts.c.id == attempt_id)).one()
    remaining = expires - op.now
    return Result(
        {
            "claim": {
                "task": task_view(op.conn, task_row(op.conn, project_id, task_id), op.now),
                "attempt": attempt_view(att, op.now),
                "lease_remaining_ms": remaining,
                "previous_attempt": attempt_view(previous, op.now) if previous else None,
                "last_checkpoint": last_checkpoint(op.conn, previous.id) if previous else None,
            },
            "renew_after_seconds": lease.renew_after_seconds(remaining),
        },
        status=201,
    )


def contribute(op: Op, task_id: str, session_id: str) -> None:
    exists = op.conn.execute(
        select(task_contributors.c.task_id).where(
            task_contributors.c.task_id == task_id,
            task_contributors.c.principal_id == op.actor.principal_id,
            task_contributors.c.session_id == session_id,
        )
    ).first()
    if exists is None:
        op.conn.execute(
            insert(task_contributors).values(
                task_id=task_id,
                principal_id=op.actor.principal_id,
                session_id=session_id,
                first_contributed_at=op.now,
            )
        )


def last_checkpoint(conn: Connection, attempt_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        select(checkpoints)
        .where(checkpoints.c.attempt_id == attempt_id)
        .order_by(checkpoints.c.created_at.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    return {
        "summary": row.summary,
        "handoff": row.handoff,
        "current_action": row.current_action,
        "next_step": row.next_step,
        "revision": row.revision,
    }


def owned_attempt(op: Op, project_id: str, attempt_id: str, generation: int) -> Row[Any]:
    """The caller's live attempt at exactly this generation, or a refusal that says why."""
    session_id = require_agent_session(op.actor)
    row = op.tx.lock(attempts, attempt_id)
    if row is None or row.project_id != project_id:
        raise CoordinatorError("record_not_found", f"no attempt {attempt_id}", status=404)
    if row.session_id != session_id or row.owner_id != op.actor.principal_id:
        raise CoordinatorError(
            "operation_not_permitted", "this attempt belongs to another session", status=403
        )
    if row.generation != generation:
        raise CoordinatorError(
            "lease_expired",
            f"generation {generation} is not this attempt's ({row.generation})",
            status=409,
            details={"current_generation": row.generation},
        )
    if row.state != AttemptState.ACTIVE or not lease.is_live(op.now, row.expires_at):
        raise CoordinatorError(
            "lease_expired",
            "the attempt no longer holds its lease",
            status=409,
            details={"state": row.state},
        )
    return row


def renew(op: Op, project_id: str, attempt_id: str, body: GenerationIn) -> Result:
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    project = project_row(op.conn, project_id)
    result = lease.renew(
        op.now, row.expires_at, project.lease_seconds, row.created_at, project.max_attempt_seconds
    )
    op.conn.execute(
        update(attempts)
        .where(attempts.c.id == attempt_id)
        .values(expires_at=result.expires_at, last_heartbeat_at=op.now)
    )
    op.event("attempt.renewed", project_id, attempt_id, generation=row.generation)
    att = op.conn.execute(select(attempts).where(attempts.c.id == attempt_id)).one()
    return Result(
        {
            "attempt": attempt_view(att, op.now),
            "lease_remaining_ms": result.remaining_ms,
            "renew_after_seconds": result.renew_after_seconds,
        }
    )


def checkpoint(op: Op, project_id: str, attempt_id: str, body: CheckpointIn) -> Result:
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    cid = new_id()
    op.conn.execute(
        insert(checkpoints).values(
            id=cid,
            attempt_id=attempt_id,
            summary=body.summary,
            handoff=body.handoff,
            current_action=body.current_action,
            next_step=body.next_step,
            revision=body.revision,
            created_at=op.now,
        )
    )
    values: dict[str, Any] = {"last_progress_at": op.now}
    if body.handoff is not None:
        values["handoff"] = body.handoff
    op.conn.execute(update(attempts).where(attempts.c.id == attempt_id).values(**values))
    op.event(
        "attempt.checkpointed", project_id, attempt_id, generation=row.generation, checkpoint_id=cid
    )
    att = op.conn.execute(select(attempts).where(attempts.c.id == attempt_id)).one()
    return Result({"checkpoint_id": cid, "attempt": attempt_view(att, op.now)}, status=201)


def release(op: Op, project_id: str, attempt_id: str, body: ReleaseIn) -> Result:
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    if row.activity_id is not None:
        raise CoordinatorError(
            "activity_release_required",
            "release a review attempt through its workflow activity",
            status=409,
        )
    state = AttemptState.BLOCKED if body.blocked else AttemptState.RELEASED
    end_attempt(op, row, state, body.handoff)
    task_values: dict[str, Any] = {
        "current_attempt_id": None,
        "ready_since": op.now,
        "updated_at": op.now,
    }
    if body.blocked:
        task_values["blocked_reason"] = body.handoff
    op.conn.execute(update(tasks).where(tasks.c.id == row.task_id).values(**task_values))
    op.event(
        "attempt.released", project_id, attempt_id, generation=row.generation, blocked=body.blocked
    )
    att = op.conn.execute(select(attempts).where(attempts.c.id == attempt_id)).one()
    return Result({"attempt": attempt_view(att, op.now)})


def end_attempt(op: Op, row: Row[Any], state: str, handoff: str | None) -> None:
    op.conn.execute(
        update(attempts)
        .where(attempts.c.id == row.id)
        .values(
            state=state,
            ended_at=op.now,
            outcome=state,
            handoff=handoff if handoff is not None else row.handoff,
        )
    )


def attempt_detail(conn: Connection, project_id: str, attempt_id: str, now: int) -> dict[str, Any]:
    row = conn.execute(
        select(attempts).where(attempts.c.id == attempt_id, attempts.c.project_id == project_id)
    ).first()
    if row is None:
        raise CoordinatorError("record_not_found", f"no attempt {attempt_id}", status=404)
    live = row.state == AttemptState.ACTIVE and lease.is_live(now, row.expires_at)
    remaining = row.expires_at - now if live else 0
    return {
        "attempt": attempt_view(row, now),
        "authority_valid": live,
        "lease_remaining_ms": remaining,
        "renew_after_seconds": lease.renew_after_seconds(remaining),
        "last_checkpoint": last_checkpoint(conn, attempt_id),
        "checkout": checkout_view(conn, attempt_id),
    }


def register_checkout(op: Op, project_id: str, attempt_id: str, body: CheckoutIn) -> Result:
    """Record where the attempt's work happens (path, branch, base); once per attempt."""
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    if row.activity_id is not None:
        raise CoordinatorError(
            "checkout_not_allowed", "review attempts register no checkout", status=409
        )
    existing = checkout_view(op.conn, attempt_id)
    wanted = {
        "path": body.path,
        "branch": body.branch,
        "base_revision": body.base_revision,
        "workstation_id": body.workstation_id,
    }
    if existing is not None:
        if {k: existing[k] for k in wanted} != wanted:
            raise CoordinatorError(
                "checkout_registered",
                "this attempt registered a different checkout",
                status=409,
                details={"checkout": existing},
            )
        return Result({"checkout": existing})
    op.conn.execute(insert(checkouts).values(attempt_id=attempt_id, created_at=op.now, **wanted))
    contribute(op, row.task_id, row.session_id)
    op.event(
        "checkout.registered",
        project_id,
        attempt_id,
        branch=body.branch,
        base_revision=body.base_revision,
    )
    return Result({"checkout": checkout_view(op.conn, attempt_id)}, status=201)


def checkout_view(conn: Connection, attempt_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(checkouts).where(checkouts.c.attempt_id == attempt_id)).first()
    if row is None:
        return None
    return {
        "attempt_id": row.attempt_id,
        "path": row.path,
        "branch": row.branch,
        "base_revision": row.base_revision,
        "workstation_id": row.workstation_id,
        "created_at": rfc3339(row.created_at),
    }
