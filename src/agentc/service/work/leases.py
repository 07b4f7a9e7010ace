"""Claims, leases, checkpoints and releases; `next`.

The generation is the fencing token: every attempt-scoped write presents it, and a write from
an attempt that is no longer the task's current one is refused.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from agentc.core import lease
from agentc.core.errors import CoordinatorError
from agentc.core.model import (
    CHECKPOINTS_PER_ATTEMPT_MAX,
    AttemptMode,
    AttemptState,
    Role,
    WorkStatus,
)
from agentc.core.rules import rfc3339
from agentc.core.status import (
    OFFERABLE,
    AttemptFacts,
    TaskFacts,
    is_offered,
    offer_key,
    offered_from,
    parked,
    work_status,
)
from agentc.service.auth import Actor, require_agent_session
from agentc.service.ops import JsonObject, Op, Result, new_id
from agentc.service.schemas import CheckoutIn, CheckpointIn, ClaimIn, ReleaseIn, RenewIn
from agentc.service.work.refusals import conflict, forbidden, missing
from agentc.service.work.tasks import locked_task
from agentc.service.work.views import (
    attempt_view,
    facts_of,
    project_row,
    task_facts,
    task_view_of,
)
from agentc.store import artifacts, leases, tasks
from agentc.store.leases import Attempt, Checkout, Checkpoint, Offer
from agentc.store.projects import Project
from agentc.store.sql import fetch_row, insert
from agentc.store.tasks import Task

NEXT_SCAN = 50  # the offer window: how many tasks on offer `next` and a queue claim look at
CLAIM_PAGE = 4  # the candidates a queue claim reads first


def _offer_status(offer: Offer, now: int, limit: int) -> WorkStatus:
    task = offer.task
    attempt = None
    if task.current_attempt_id is not None and offer.attempt_state is not None:
        assert offer.attempt_expires_at is not None
        attempt = AttemptFacts(offer.attempt_state, offer.attempt_expires_at, offer.owner_lost_at)
    return work_status(facts_of(task, attempt, True, limit), now)


def _offered(
    conn: Connection, project: Project, now: int, limit: int
) -> tuple[int, list[tuple[Task, WorkStatus]]]:
    """How many tasks the offer window held (the first NEXT_SCAN on offer), and the first
    ``limit`` claimable ones in it: recovery first, then ready, each in the core's offer
    order, with its derived status. The SQL orders the same way, so its LIMIT keeps the
    best; the order and the statuses are the core's."""
    park_after = project.park_after_attempts
    inspected, found = leases.offers(conn, project.id, now, park_after, limit, NEXT_SCAN)
    statuses = [(o.task, _offer_status(o, now, park_after)) for o in found]
    claimable = [o for o in statuses if o[1] in OFFERABLE]
    claimable.sort(
        key=lambda o: (
            o[1] != WorkStatus.RECOVERY_REQUIRED,
            offer_key(o[0].priority, o[0].ready_since, o[0].id),
        )
    )
    return inspected, claimable


def next_action(conn: Connection, project_id: str, now: int, actor: Actor) -> JsonObject:
    """At most one suggested claim: recoverable work first, then ready work. Read only."""
    project = project_row(conn, project_id)
    inspected, offered = _offered(conn, project, now, 1)
    if not offered:
        return suggestion(Role.IMPLEMENTER, None, inspected)
    task, status = offered[0]
    return suggestion(
        Role.IMPLEMENTER,
        {
            "kind": "recover_task" if status == WorkStatus.RECOVERY_REQUIRED else "claim_task",
            "task_id": task.id,
            "task_kind": task.kind,
            "title": task.title,
            "priority": task.priority,
            "task_revision": task.revision,
            "call": {
                "method": "POST",
                "path": f"/api/v1/projects/{project_id}/claims",
                "body": {"task_id": task.id, "expected_task_revision": task.revision},
            },
        },
        inspected,
    )


def suggestion(role: Role, action: JsonObject | None, inspected: int) -> JsonObject:
    """What `next` answers: the action to take, or none and when to ask again."""
    return {
        "role": role.value,
        "action": action,
        "inspected": inspected,
        "retry_after_seconds": 0 if action else 30,
    }


class Claimable(NamedTuple):
    """A task judged by the core's rules as it now is (locked), with its prerequisites."""

    task: Task
    facts: TaskFacts
    status: WorkStatus
    prerequisites: tasks.Prerequisites


def _next_claimable(op: Op, project: Project) -> Claimable | None:
    """The first task on offer that this transaction can take: recovery first, then ready.
    On PostgreSQL one statement reads the offer window and locks its first candidate no
    other claim holds (SKIP LOCKED), so concurrent queue claims spread over the tasks instead
    of colliding on the first. On SQLite's single writer nothing else holds a candidate: the
    first CLAIM_PAGE are read, then (if none of them can be taken) the whole window."""
    if op.tx.is_postgres:
        return _first_claimable_locked(op, project)
    tried: set[str] = set()
    for limit in (CLAIM_PAGE, NEXT_SCAN):
        inspected, offered = _offered(op.conn, project, op.now, limit)
        for candidate, _status in offered:
            if candidate.id in tried:
                continue
            tried.add(candidate.id)
            # Read in this transaction, under the one writer's lock: nothing changed it since.
            judged = _judged(op, project, candidate)
            if is_offered(judged.facts, op.now):
                return judged
        if inspected <= limit:
            break
    return None


def _first_claimable_locked(op: Op, project: Project) -> Claimable | None:
    """PostgreSQL: lock the window's first candidate that no other transaction holds (SKIP
    LOCKED, in the offer query itself), then judge it by the core's rules as it now is; one
    that is not claimable any more is left out and the next one locked."""
    tried: list[str] = []
    while len(tried) < NEXT_SCAN:
        task = leases.lock_first_offered(
            op.tx, project.id, op.now, project.park_after_attempts, NEXT_SCAN, tried
        )
        if task is None:
            return None
        tried.append(task.id)
        judged = _judged(op, project, task)
        if is_offered(judged.facts, op.now):
            return judged
    return None


def _judged(op: Op, project: Project, task: Task) -> Claimable:
    """The task (locked) judged by the core's rules as it now is, with its prerequisites."""
    prerequisites = tasks.prerequisites(op.conn, task.id)
    facts = task_facts(op.conn, task, prerequisites, limit=project.park_after_attempts)
    return Claimable(task, facts, work_status(facts, op.now), prerequisites)


def _named_task(op: Op, project: Project, body: ClaimIn) -> Claimable:
    """The task the claim names, at the revision it expects, if it is on offer."""
    assert body.task_id is not None and body.expected_task_revision is not None
    task = locked_task(op, project.id, body.task_id, body.expected_task_revision)
    judged = _judged(op, project, task)
    status = judged.status
    if parked(judged.facts, op.now):
        raise conflict(
            "claim_conflict",
            f"the task is parked: {task.tries} attempts in a row ended without a submission; "
            "a person puts it back",
            task={"id": task.id, "work_status": status.value, "parked": True},
        )
    if status not in OFFERABLE:
        raise conflict(
            "claim_conflict",
            f"the task is {status.value}, not ready",
            task={"id": task.id, "work_status": status.value},
        )
    if not is_offered(judged.facts, op.now):
        offered = rfc3339(offered_from(judged.facts))
        raise conflict(
            "claim_conflict",
            f"the task is backing off: {task.tries} attempt(s) in a row ended without a "
            f"submission, so it is offered again from {offered}",
            task={"id": task.id, "work_status": status.value, "offered_from": offered},
        )
    return judged


def new_attempt(
    op: Op,
    project: Project,
    session_id: str,
    *,
    task: Task,
    activity_id: str | None,
    generation: int,
    mode: AttemptMode,
) -> Attempt:
    """A fresh active attempt of the caller's session, with a full lease, recorded; a second
    active attempt of the same task or activity (a concurrent claim) is a conflict."""
    assert op.actor.credential_id is not None  # an agent session's actor
    expires = lease.renewed_expiry(
        op.now, project.lease_seconds, op.now, project.max_attempt_seconds
    )
    attempt = Attempt(
        id=new_id(),
        project_id=project.id,
        task_id=task.id,
        activity_id=activity_id,
        owner_id=op.actor.principal_id,
        session_id=session_id,
        credential_id=op.actor.credential_id,
        generation=generation,
        state=AttemptState.ACTIVE.value,
        mode=mode.value,
        task_revision=task.revision,
        policy_revision=project.policy_revision,
        expires_at=expires,
        last_heartbeat_at=op.now,
        last_progress_at=op.now,
        created_at=op.now,
        ended_at=None,
        outcome=None,
        handoff=None,
    )
    what = "task" if activity_id is None else "activity"
    try:
        # No savepoint: the conflict ends the whole mutation, so its transaction rolls back.
        insert(op.conn, attempt)
    except IntegrityError as exc:  # another claim won the race
        raise conflict("claim_conflict", f"the {what} was claimed concurrently") from exc
    return attempt


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
        found = _next_claimable(op, project)
        if found is None:
            op.event("claim.empty", project_id, None)
            return Result({"claim": None, "reasons": ["no ready task"], "retry_after_seconds": 30})
    else:
        found = _named_task(op, project, body)
    task, prerequisites = found.task, found.prerequisites
    previous = None
    if found.status == WorkStatus.RECOVERY_REQUIRED:
        previous = _take_over(op, task)
    mode = AttemptMode.RECOVERY if previous is not None else AttemptMode.WORK
    generation = task.generation + 1
    attempt = new_attempt(
        op, project, session_id, task=task, activity_id=None, generation=generation, mode=mode
    )
    task = tasks.assign_attempt(op.conn, task, attempt.id, generation, op.now)
    contribute(op, task.id, session_id)
    op.event(
        "attempt.claimed",
        project_id,
        attempt.id,
        task_id=task.id,
        generation=generation,
        mode=mode.value,
    )
    answer = _claimed(op, project, task, prerequisites, attempt, previous)
    return Result(answer, status=201)


def _take_over(op: Op, task: Task) -> Attempt | None:
    """A recovery claim ends the task's lapsed attempt; returns it as it was."""
    assert task.current_attempt_id is not None
    previous = fetch_row(op.conn, Attempt, task.current_attempt_id)
    leases.end_attempt(
        op.conn,
        task.current_attempt_id,
        op.now,
        state=AttemptState.EXPIRED,
        outcome="lease lapsed; taken over by a recovery claim",
        handoff=previous.handoff if previous is not None else None,
    )
    return previous


def _claimed(
    op: Op,
    project: Project,
    task: Task,
    prerequisites: tasks.Prerequisites,
    attempt: Attempt,
    previous: Attempt | None,
) -> JsonObject:
    """The claim's answer, from what the claim read and wrote (nothing is read back): the
    task is held by the new attempt, whose owner is the caller, authenticated live in this
    transaction."""
    held = AttemptFacts(attempt.state, attempt.expires_at)
    facts = facts_of(task, held, prerequisites.done, project.park_after_attempts)
    remaining = attempt.expires_at - op.now
    return {
        "claim": {
            "task": task_view_of(task, facts, prerequisites.ids, op.now),
            "attempt": attempt_view(attempt, op.now),
            "lease_remaining_ms": remaining,
            "previous_attempt": attempt_view(previous, op.now) if previous else None,
            "last_checkpoint": last_checkpoint(op.conn, previous.id) if previous else None,
        },
        "renew_after_seconds": lease.renew_after_seconds(remaining),
    }


def contribute(op: Op, task_id: str, session_id: str) -> None:
    leases.add_contributor(op.conn, task_id, op.actor.principal_id, session_id, op.now)


def last_checkpoint(conn: Connection, attempt_id: str) -> JsonObject | None:
    row = leases.last_checkpoint(conn, attempt_id)
    if row is None:
        return None
    return {
        "summary": row.summary,
        "handoff": row.handoff,
        "current_action": row.current_action,
        "next_step": row.next_step,
        "revision": row.revision,
    }


def owned_attempt(op: Op, project_id: str, attempt_id: str, generation: int) -> Attempt:
    """The caller's live attempt at exactly this generation, locked, or a refusal that says
    why."""
    return _held(op, project_id, attempt_id, generation, op.tx.lock(Attempt, attempt_id))


def _held(
    op: Op, project_id: str, attempt_id: str, generation: int, row: Attempt | None
) -> Attempt:
    """row (the attempt read for update) if it is the caller's live attempt at exactly this
    generation; otherwise a refusal that says why."""
    session_id = require_agent_session(op.actor)
    if row is None or row.project_id != project_id:
        raise missing(f"no attempt {attempt_id}")
    if row.session_id != session_id or row.owner_id != op.actor.principal_id:
        raise forbidden("operation_not_permitted", "this attempt belongs to another session")
    if row.generation != generation:
        raise conflict(
            "lease_expired",
            f"generation {generation} is not this attempt's ({row.generation})",
            current_generation=row.generation,
        )
    if row.state != AttemptState.ACTIVE or not lease.is_live(op.now, row.expires_at):
        raise conflict("lease_expired", "the attempt no longer holds its lease", state=row.state)
    return row


def renew(op: Op, project_id: str, attempt_id: str, body: RenewIn) -> Result:
    found = leases.lock_with_policy(op.tx, attempt_id)
    row = _held(op, project_id, attempt_id, body.generation, found and found[0])
    assert found is not None
    policy = found[1]
    result = lease.renew(
        op.now, row.expires_at, policy.lease_seconds, row.created_at, policy.max_attempt_seconds
    )
    leases.renew_attempt(op.conn, attempt_id, result.expires_at, op.now)
    live = {"step": body.step, "spent_usd": body.spent_usd, "spent_tokens": body.spent_tokens}
    if any(v is not None for v in live.values()):  # for the task page, not an event
        artifacts.note_live(op.conn, new_id(), row, live, op.actor.principal_id, op.now)
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
    if leases.checkpoint_count(op.conn, attempt_id) >= CHECKPOINTS_PER_ATTEMPT_MAX:
        raise conflict(
            "checkpoint_limit",
            f"attempt {attempt_id} has recorded {CHECKPOINTS_PER_ATTEMPT_MAX} checkpoints, the "
            "most one attempt may; release it with a handoff instead",
        )
    cid = new_id()
    said = (body.summary, body.handoff, body.current_action, body.next_step, body.revision)
    insert(op.conn, Checkpoint(cid, attempt_id, *said, created_at=op.now), deferred=True)
    handoff = body.handoff if body.handoff is not None else row.handoff
    leases.note_progress(op.conn, attempt_id, op.now, handoff)
    op.event(
        "attempt.checkpointed", project_id, attempt_id, generation=row.generation, checkpoint_id=cid
    )
    att = row._replace(last_progress_at=op.now, handoff=handoff)
    return Result({"checkpoint_id": cid, "attempt": attempt_view(att, op.now)}, status=201)


def release(op: Op, project_id: str, attempt_id: str, body: ReleaseIn) -> Result:
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    if row.activity_id is not None:
        raise conflict(
            "activity_release_required", "release a review attempt through its workflow activity"
        )
    state = AttemptState.BLOCKED if body.blocked else AttemptState.RELEASED
    ended = end_attempt(op, row, state, body.handoff)
    tasks.release_task(op.conn, row.task_id, op.now, blocked=body.blocked, reason=body.handoff)
    op.event(
        "attempt.released", project_id, attempt_id, generation=row.generation, blocked=body.blocked
    )
    return Result({"attempt": attempt_view(ended, op.now)})


def end_attempt(op: Op, row: Attempt, state: AttemptState, handoff: str | None) -> Attempt:
    """End the caller's attempt in state (its outcome); a handoff given replaces the last.
    Returns the attempt as it now is."""
    kept = handoff if handoff is not None else row.handoff
    leases.end_attempt(op.conn, row.id, op.now, state=state, outcome=state.value, handoff=kept)
    return row._replace(state=state.value, ended_at=op.now, outcome=state.value, handoff=kept)


def attempt_detail(conn: Connection, project_id: str, attempt_id: str, now: int) -> JsonObject:
    row = leases.get_project_attempt(conn, project_id, attempt_id)
    if row is None:
        raise missing(f"no attempt {attempt_id}")
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
        raise conflict("checkout_not_allowed", "review attempts register no checkout")
    wanted = Checkout(
        attempt_id, body.path, body.branch, body.base_revision, body.workstation_id, op.now
    )
    existing = fetch_row(op.conn, Checkout, attempt_id)
    if existing is not None:
        if existing._replace(created_at=op.now) != wanted:
            raise conflict(
                "checkout_registered",
                "this attempt registered a different checkout",
                checkout=_checkout_view(existing),
            )
        return Result({"checkout": _checkout_view(existing)})
    insert(op.conn, wanted)
    contribute(op, row.task_id, row.session_id)
    op.event(
        "checkout.registered",
        project_id,
        attempt_id,
        branch=body.branch,
        base_revision=body.base_revision,
    )
    return Result({"checkout": _checkout_view(wanted)}, status=201)


def checkout_view(conn: Connection, attempt_id: str) -> JsonObject | None:
    row = fetch_row(conn, Checkout, attempt_id)
    return None if row is None else _checkout_view(row)


def _checkout_view(row: Checkout) -> JsonObject:
    return {**row._asdict(), "created_at": rfc3339(row.created_at)}
