"""Claims, leases, checkpoints and releases; `next`.

The generation is the fencing token: every attempt-scoped write presents it, and a write from
an attempt that is no longer the task's current one is refused.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from agentc.core import lease
from agentc.core.errors import CoordinatorError
from agentc.core.model import AttemptMode, AttemptState, WorkStatus
from agentc.core.rules import rfc3339
from agentc.core.status import AttemptFacts, TaskFacts, offer_key, work_status
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
    attempts,
    checkouts,
    tasks,
)
from agentc.store.tx import q, q1

_prereq = tasks.alias("prereq")

NEXT_SCAN = 50

_ATTEMPT = "SELECT * FROM attempts WHERE id = :id"
_NEW_ATTEMPT = (
    "INSERT INTO attempts (id, project_id, task_id, activity_id, owner_id, session_id, "
    "credential_id, generation, state, mode, task_revision, policy_revision, expires_at, "
    "last_heartbeat_at, last_progress_at, created_at) VALUES (:id, :project_id, :task_id, "
    ":activity_id, :owner_id, :session_id, :credential_id, :generation, 'active', :mode, "
    ":task_revision, :policy_revision, :expires_at, :now, :now, :now)"
)


# One query for `next`: open tasks outside review and integration with no unfinished
# prerequisite and no current attempt that still holds its lease, each with its current
# attempt's facts; the pure status rule then picks recovery first, then ready.
_OFFER = (
    "SELECT t.*, a.state AS attempt_state, a.expires_at AS attempt_expires_at, "
    "p.disabled_at AS owner_disabled_at, c.revoked_at AS owner_revoked_at, "
    "s.closed_at AS owner_closed_at "
    "FROM tasks t "
    "LEFT JOIN attempts a ON a.id = t.current_attempt_id "
    "LEFT JOIN principals p ON p.id = a.owner_id "
    "LEFT JOIN credentials c ON c.id = a.credential_id "
    "LEFT JOIN agent_sessions s ON s.id = a.session_id "
    "WHERE t.project_id = :project_id AND t.lifecycle = 'open' AND t.blocked_reason IS NULL "
    "AND (t.phase IS NULL OR t.phase = 'revision_needed') "
    "AND NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks pr "
    "ON pr.id = d.prerequisite_id WHERE d.task_id = t.id AND pr.lifecycle <> 'done') "
    "AND (a.id IS NULL OR a.state <> 'active' OR a.expires_at <= :now "
    "OR p.disabled_at IS NOT NULL OR c.revoked_at IS NOT NULL OR s.closed_at IS NOT NULL) "
    "ORDER BY t.priority, t.ready_since, t.id LIMIT :limit"
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


def _offered(rows: list[Any], now: int) -> list[tuple[Any, WorkStatus]]:
    """Candidates in the core's offer order (the SQL orders the same way so LIMIT keeps the
    best), each with its derived status."""
    ordered = sorted(rows, key=lambda r: offer_key(r.priority, r.ready_since, r.id))
    return [(r, _offer_status(r, now)) for r in ordered]


def next_action(conn: Connection, project_id: str, now: int, actor: Actor) -> dict[str, Any]:
    """At most one suggested claim: recoverable work first, then ready work. Read only."""
    project_row(conn, project_id)
    rows = q(conn, _OFFER, project_id=project_id, limit=NEXT_SCAN, now=now)
    statuses = _offered(rows, now)
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
    rows = op.tx.q(_OFFER, project_id=project_id, limit=NEXT_SCAN, now=op.now)
    offered = _offered(rows, op.now)
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
        previous = op.tx.q1(_ATTEMPT, id=row.current_attempt_id)
        op.tx.x(
            "UPDATE attempts SET state = 'expired', ended_at = :now, outcome = :outcome "
            "WHERE id = :id",
            now=op.now,
            outcome="lease lapsed; taken over by a recovery claim",
            id=row.current_attempt_id,
        )
    attempt_id = new_id()
    generation = row.generation + 1
    expires = lease.renewed_expiry(
        op.now, project.lease_seconds, op.now, project.max_attempt_seconds
    )
    mode = AttemptMode.RECOVERY if previous is not None else AttemptMode.WORK
    try:
        with op.tx.savepoint_if_concurrent():
            op.tx.x(
                _NEW_ATTEMPT,
                id=attempt_id,
                project_id=project_id,
                task_id=task_id,
                activity_id=None,
                owner_id=op.actor.principal_id,
                session_id=session_id,
                credential_id=op.actor.credential_id,
                generation=generation,
                mode=mode.value,
                task_revision=row.revision,
                policy_revision=project.policy_revision,
                expires_at=expires,
                now=op.now,
            )
    except IntegrityError as exc:  # another claim won the race
        raise CoordinatorError(
            "claim_conflict", "the task was claimed concurrently", status=409
        ) from exc
    op.tx.x(
        "UPDATE tasks SET generation = :generation, current_attempt_id = :attempt_id, "
        "updated_at = :now WHERE id = :id",
        generation=generation,
        attempt_id=attempt_id,
        now=op.now,
        id=task_id,
    )
    contribute(op, task_id, session_id)
    op.event(
        "attempt.claimed",
        project_id,
        attempt_id,
        task_id=task_id,
        generation=generation,
        mode=mode.value,
    )
    att = op.tx.q1(_ATTEMPT, id=attempt_id)
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
    exists = op.tx.q1(
        "SELECT task_id FROM task_contributors WHERE task_id = :task_id "
        "AND principal_id = :principal_id AND session_id = :session_id",
        task_id=task_id,
        principal_id=op.actor.principal_id,
        session_id=session_id,
    )
    if exists is None:
        op.tx.x(
            "INSERT INTO task_contributors (task_id, principal_id, session_id, "
            "first_contributed_at) VALUES (:task_id, :principal_id, :session_id, :now)",
            task_id=task_id,
            principal_id=op.actor.principal_id,
            session_id=session_id,
            now=op.now,
        )


def last_checkpoint(conn: Connection, attempt_id: str) -> dict[str, Any] | None:
    row = q1(
        conn,
        "SELECT * FROM checkpoints WHERE attempt_id = :attempt_id "
        "ORDER BY created_at DESC, id DESC LIMIT 1",
        attempt_id=attempt_id,
    )
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
    op.tx.x(
        "UPDATE attempts SET expires_at = :expires_at, last_heartbeat_at = :now WHERE id = :id",
        expires_at=result.expires_at,
        now=op.now,
        id=attempt_id,
    )
    op.event("attempt.renewed", project_id, attempt_id, generation=row.generation)
    att = row._replace(expires_at=result.expires_at, last_heartbeat_at=op.now)
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
    op.tx.x(
        "INSERT INTO checkpoints (id, attempt_id, summary, handoff, current_action, next_step, "
        "revision, created_at) VALUES (:id, :attempt_id, :summary, :handoff, :current_action, "
        ":next_step, :revision, :now)",
        id=cid,
        attempt_id=attempt_id,
        summary=body.summary,
        handoff=body.handoff,
        current_action=body.current_action,
        next_step=body.next_step,
        revision=body.revision,
        now=op.now,
    )
    handoff = body.handoff if body.handoff is not None else row.handoff
    op.tx.x(
        "UPDATE attempts SET last_progress_at = :now, handoff = :handoff WHERE id = :id",
        now=op.now,
        handoff=handoff,
        id=attempt_id,
    )
    op.event(
        "attempt.checkpointed", project_id, attempt_id, generation=row.generation, checkpoint_id=cid
    )
    att = row._replace(last_progress_at=op.now, handoff=handoff)
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
    op.tx.x(
        "UPDATE tasks SET current_attempt_id = NULL, ready_since = :now, updated_at = :now, "
        "blocked_reason = CASE WHEN :blocked THEN :reason ELSE blocked_reason END "
        "WHERE id = :id",
        now=op.now,
        blocked=body.blocked,
        reason=body.handoff,
        id=row.task_id,
    )
    op.event(
        "attempt.released", project_id, attempt_id, generation=row.generation, blocked=body.blocked
    )
    att = op.tx.q1(_ATTEMPT, id=attempt_id)
    return Result({"attempt": attempt_view(att, op.now)})


def end_attempt(op: Op, row: Any, state: str, handoff: str | None) -> None:
    op.tx.x(
        "UPDATE attempts SET state = :state, ended_at = :now, outcome = :outcome, "
        "handoff = :handoff WHERE id = :id",
        state=str(state),
        outcome=str(state),
        now=op.now,
        handoff=handoff if handoff is not None else row.handoff,
        id=row.id,
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
