"""Attempts (the leases), their checkpoints and checkouts, task contributors, and the offer
scan behind `next` and queue claims: rows and queries. The claim/renew/checkpoint/release hot
path runs fixed SQL strings on the driver."""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from agentc.core.model import AttemptState, Lifecycle, Phase
from agentc.core.status import backoff_steps
from agentc.store.sql import (
    columns,
    defer,
    fetch_all,
    fetch_count,
    fetch_exists,
    fetch_in_project,
    fetch_one,
    run,
    table,
)
from agentc.store.tasks import Task
from agentc.store.tx import Tx


@table("attempts")
class Attempt(NamedTuple):
    id: str
    project_id: str
    task_id: str
    activity_id: str | None
    owner_id: str
    session_id: str
    credential_id: str
    generation: int
    state: str
    mode: str
    task_revision: int
    policy_revision: int
    expires_at: int
    last_heartbeat_at: int
    last_progress_at: int
    created_at: int
    ended_at: int | None
    outcome: str | None
    handoff: str | None


@table("checkpoints")
class Checkpoint(NamedTuple):
    id: str
    attempt_id: str
    summary: str
    handoff: str | None
    current_action: str | None
    next_step: str | None
    revision: str | None
    created_at: int


@table("checkouts", key="attempt_id")
class Checkout(NamedTuple):
    attempt_id: str
    path: str
    branch: str
    base_revision: str
    workstation_id: str | None
    created_at: int


class Offer(NamedTuple):
    """A task on offer with its current attempt's facts (None when it has none)."""

    task: Task
    attempt_state: str | None
    attempt_expires_at: int | None
    owner_lost_at: int | None  # see `agentc.core.status.AttemptFacts`


class HeldAttempt(NamedTuple):
    id: str
    project_id: str
    task_id: str
    activity_id: str | None
    generation: int
    expires_at: int


_ATTEMPT = f"SELECT {columns(Attempt)} FROM attempts"
_OF_TASK = (
    _ATTEMPT + " WHERE task_id = :task_id ORDER BY created_at DESC, generation DESC LIMIT :limit"
)
_HELD = (
    f"SELECT {columns(HeldAttempt)} FROM attempts WHERE session_id = :session_id "
    f"AND state = '{AttemptState.ACTIVE}' ORDER BY created_at"
)
_RENEW = "UPDATE attempts SET expires_at = :expires_at, last_heartbeat_at = :now WHERE id = :id"
_PROGRESS = "UPDATE attempts SET last_progress_at = :now, handoff = :handoff WHERE id = :id"
_END = (
    "UPDATE attempts SET state = :state, ended_at = :now, outcome = :outcome, "
    "handoff = :handoff WHERE id = :id"
)
_END_IF_ACTIVE = (
    "UPDATE attempts SET state = :state, ended_at = :now "
    f"WHERE id = :id AND state = '{AttemptState.ACTIVE}'"
)
_OWNER = (
    "SELECT s.closed_at, c.revoked_at, p.disabled_at FROM attempts a "
    "JOIN principals p ON p.id = a.owner_id JOIN credentials c ON c.id = a.credential_id "
    "JOIN agent_sessions s ON s.id = a.session_id WHERE a.id = :id"
)
_LAST_CHECKPOINT = (
    f"SELECT {columns(Checkpoint)} FROM checkpoints WHERE attempt_id = :attempt_id "
    "ORDER BY created_at DESC, id DESC LIMIT 1"
)
_ADD_CONTRIBUTOR = (
    "INSERT INTO task_contributors (task_id, principal_id, session_id, first_contributed_at) "
    "VALUES (:task_id, :principal_id, :session_id, :now) ON CONFLICT DO NOTHING"
)
_INDEPENDENT = (
    "SELECT task_id FROM task_contributors WHERE task_id = :task_id AND "
    "(principal_id = :principal_id OR session_id = :session_id) LIMIT 1"
)

# `agentc.core.status.backoff_ms` of a task's tries, spelled out from its table.
_BACKOFF = (
    "(CASE "
    + " ".join(f"WHEN t.tries <= {n} THEN {ms}" for n, ms in backoff_steps()[:-1])
    + f" ELSE {backoff_steps()[-1][1]} END)"
)
# When the task's last attempt stopped (`agentc.core.status.offered_from`): a lapsed one when
# its owner lost it (the first set of session closed, credential revoked, principal disabled,
# as `owner_lost_at` reads them) or else when it expired; otherwise when the task became ready.
_STOPPED = (
    f"(CASE WHEN a.id IS NULL OR a.state <> '{AttemptState.ACTIVE}' THEN t.ready_since "
    "ELSE COALESCE(s.closed_at, c.revoked_at, p.disabled_at, a.expires_at) END)"
)

# One query for `next` and queue claims. The window: the first `scan` open tasks outside
# review and integration, in offer order (priority, ready_since, id), with no unfinished
# prerequisite, no current attempt that still holds its lease, fewer than `park_after` tries
# (not parked) and past the backoff of those tries, unless `park_after` is 0 (the rule is off;
# a task backing off or parked is not in the window, so it never crowds out the tasks on
# offer behind it). Of the window, the first
# `limit` rows come back, recovery first (a current attempt that is still active no longer
# holds: the status rule in `agentc.core.status` says so too, and the caller checks), each
# with its current attempt's facts and the window's size. The window is scanned on narrow
# columns; only the rows that come back read the whole task.
_RECOVERY_FIRST = (
    f"CASE WHEN o_state = '{AttemptState.ACTIVE}' THEN 0 ELSE 1 END, o_priority, o_ready, o_id"
)
_WINDOW = (
    "WITH w AS (SELECT t.id AS o_id, t.priority AS o_priority, t.ready_since AS o_ready, "
    "a.state AS o_state, a.expires_at AS o_expires, p.disabled_at AS o_disabled, "
    "c.revoked_at AS o_revoked, s.closed_at AS o_closed "
    "FROM tasks t "
    "LEFT JOIN attempts a ON a.id = t.current_attempt_id "
    "LEFT JOIN principals p ON p.id = a.owner_id "
    "LEFT JOIN credentials c ON c.id = a.credential_id "
    "LEFT JOIN agent_sessions s ON s.id = a.session_id "
    f"WHERE t.project_id = :project_id AND t.lifecycle = '{Lifecycle.OPEN}' "
    "AND t.blocked_reason IS NULL "
    f"AND (t.phase IS NULL OR t.phase = '{Phase.REVISION_NEEDED}') "
    "AND NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks pr "
    f"ON pr.id = d.prerequisite_id WHERE d.task_id = t.id AND pr.lifecycle <> '{Lifecycle.DONE}') "
    f"AND (a.id IS NULL OR a.state <> '{AttemptState.ACTIVE}' OR a.expires_at <= :now "
    "OR p.disabled_at IS NOT NULL OR c.revoked_at IS NOT NULL OR s.closed_at IS NOT NULL) "
    f"AND (:park_after = 0 OR (t.tries < :park_after AND {_STOPPED} + {_BACKOFF} <= :now)) "
    "ORDER BY t.priority, t.ready_since, t.id LIMIT :scan) "
)
_OFFER = (
    _WINDOW + ", "
    f"top AS (SELECT * FROM w ORDER BY {_RECOVERY_FIRST} LIMIT :limit) "
    f"SELECT {columns(Task, 't')}, top.o_state, top.o_expires, top.o_disabled, top.o_revoked, "
    "top.o_closed, (SELECT count(*) FROM w) FROM top JOIN tasks t ON t.id = top.o_id "
    f"ORDER BY {_RECOVERY_FIRST}"
)
_TASK_WIDTH = len(Task._fields)


class Offered(NamedTuple):
    """How many tasks the window held, and the first of them, recovery first."""

    inspected: int
    offers: list[Offer]


def _lost_at(closed_at: int | None, revoked_at: int | None, disabled_at: int | None) -> int | None:
    """When an attempt's owner lost its lease: the first of these that is set, in this order
    (as _STOPPED's COALESCE takes them)."""
    return next((t for t in (closed_at, revoked_at, disabled_at) if t is not None), None)


def _offer(*row: Any) -> tuple[Offer, int]:  # the driver's values, in _OFFER's column order
    state, expires_at, disabled_at, revoked_at, closed_at, inspected = row[_TASK_WIDTH:]
    lost_at = _lost_at(closed_at, revoked_at, disabled_at)
    return Offer(Task(*row[:_TASK_WIDTH]), state, expires_at, lost_at), inspected


def offers(
    conn: Connection, project_id: str, now: int, park_after: int, limit: int, scan: int
) -> Offered:
    """The first ``limit`` tasks on offer among the first ``scan`` (see _OFFER); a task with
    ``park_after`` tries or more is parked."""
    rows = fetch_all(
        conn,
        _OFFER,
        _offer,
        project_id=project_id,
        now=now,
        park_after=park_after,
        scan=scan,
        limit=limit,
    )
    return Offered(rows[0][1] if rows else 0, [offer for offer, _ in rows])


# PostgreSQL's queue claim: the first task of the offer window, in the same order as _OFFER
# (recovery first), that no other transaction has locked, locked in the same statement
# (`Tx.lock_one` adds FOR UPDATE OF t SKIP LOCKED), leaving out the ones already tried.
_FIRST_UNLOCKED = (
    _WINDOW + f"SELECT {columns(Task, 't')} FROM w JOIN tasks t ON t.id = w.o_id "
    f"WHERE t.id <> ALL(:tried) ORDER BY {_RECOVERY_FIRST} LIMIT 1"
)


def lock_first_offered(
    tx: Tx, project_id: str, now: int, park_after: int, scan: int, tried: list[str]
) -> Task | None:
    """PostgreSQL: the first task on offer among the first ``scan`` (see _OFFER's window),
    recovery first, that another transaction does not hold locked and is not in tried,
    read for update in one statement (a queue claim's candidate)."""
    assert tx.is_postgres
    return tx.lock_one(
        _FIRST_UNLOCKED,
        Task,
        of="t",
        skip_locked=True,
        project_id=project_id,
        now=now,
        park_after=park_after,
        scan=scan,
        tried=tried,
    )


def get_project_attempt(conn: Connection, project_id: str, attempt_id: str) -> Attempt | None:
    return fetch_in_project(conn, Attempt, attempt_id, project_id)


def attempts_of_task(conn: Connection, task_id: str, limit: int) -> list[Attempt]:
    """The task's attempts, newest first."""
    return fetch_all(conn, _OF_TASK, Attempt, task_id=task_id, limit=limit)


def held_attempts(conn: Connection, session_id: str) -> list[HeldAttempt]:
    """The session's active attempts, oldest first."""
    return fetch_all(conn, _HELD, HeldAttempt, session_id=session_id)


class LeasePolicy(NamedTuple):
    """The project's lease rules an attempt is renewed by."""

    lease_seconds: int
    max_attempt_seconds: int


_WITH_POLICY = (
    f"SELECT {columns(Attempt, 'a')}, p.lease_seconds, p.max_attempt_seconds "
    "FROM attempts a JOIN projects p ON p.id = a.project_id WHERE a.id = :id"
)


def _with_policy(*values: Any) -> tuple[Attempt, LeasePolicy]:
    return Attempt(*values[:-2]), LeasePolicy(*values[-2:])


def lock_with_policy(tx: Tx, attempt_id: str) -> tuple[Attempt, LeasePolicy] | None:
    """The attempt, locked, with its project's lease rules (read, not locked): a renewal's
    one read."""
    return tx.lock_one(_WITH_POLICY, _with_policy, of="a", id=attempt_id)


def renew_attempt(conn: Connection, attempt_id: str, expires_at: int, now: int) -> None:
    """Deferred (`agentc.store.sql.defer`), as the attempt's other writes below: the caller has
    locked the attempt, so the update cannot be refused."""
    defer(conn, _RENEW, expires_at=expires_at, now=now, id=attempt_id)


def note_progress(conn: Connection, attempt_id: str, now: int, handoff: str | None) -> None:
    defer(conn, _PROGRESS, now=now, handoff=handoff, id=attempt_id)


def end_attempt(
    conn: Connection,
    attempt_id: str,
    now: int,
    *,
    state: AttemptState,
    outcome: str,
    handoff: str | None,
) -> None:
    defer(conn, _END, state=state.value, now=now, outcome=outcome, handoff=handoff, id=attempt_id)


def end_if_active(conn: Connection, attempt_id: str, now: int, state: AttemptState) -> None:
    """End the attempt in state unless it has already ended."""
    run(conn, _END_IF_ACTIVE, state=state.value, now=now, id=attempt_id)


def owner_lost_at(conn: Connection, attempt_id: str) -> int | None:
    """The owner of a lease still holds it only while its principal, credential and session
    are live: when it lost it (None: it has not)."""
    return fetch_one(conn, _OWNER, _lost_at, id=attempt_id)


def checkpoint_count(conn: Connection, attempt_id: str) -> int:
    """How many checkpoints the attempt recorded."""
    return fetch_count(conn, "SELECT COUNT(*) FROM checkpoints WHERE attempt_id = :a", a=attempt_id)


def last_checkpoint(conn: Connection, attempt_id: str) -> Checkpoint | None:
    return fetch_one(conn, _LAST_CHECKPOINT, Checkpoint, attempt_id=attempt_id)


def add_contributor(
    conn: Connection, task_id: str, principal_id: str, session_id: str, now: int
) -> None:
    """Record that the principal and its session worked on the task (once: the first time is
    kept). Deferred (`agentc.store.sql.defer`)."""
    defer(
        conn,
        _ADD_CONTRIBUTOR,
        task_id=task_id,
        principal_id=principal_id,
        session_id=session_id,
        now=now,
    )


def contributed(conn: Connection, task_id: str, principal_id: str, session_id: str | None) -> bool:
    """Whether the principal (or, when given, the session) contributed to the task."""
    return fetch_exists(
        conn, _INDEPENDENT, task_id=task_id, principal_id=principal_id, session_id=session_id
    )


_ENDED_WITH_NEWS = _ATTEMPT + (
    " WHERE project_id = :project_id AND ended_at >= :since AND "
    f"(state = '{AttemptState.EXPIRED}' OR (state IN ('{AttemptState.RELEASED}', "
    f"'{AttemptState.BLOCKED}') AND handoff IS NOT NULL)) ORDER BY ended_at DESC, id LIMIT :limit"
)


def ended_attempts_since(
    conn: Connection, project_id: str, since: int, limit: int
) -> list[Attempt]:
    """The project's attempts that expired, or were released or blocked with a handoff, since
    the given time; newest first."""
    return fetch_all(
        conn, _ENDED_WITH_NEWS, Attempt, project_id=project_id, since=since, limit=limit
    )


_WORKING = (
    "SELECT DISTINCT task_id FROM attempts WHERE project_id = :project_id "
    f"AND state = '{AttemptState.ACTIVE}' AND expires_at > :now"
)


def working_tasks(conn: Connection, project_id: str, now: int) -> set[str]:
    """The project's tasks with an agent working now: an active attempt, its lease live."""
    return set(fetch_all(conn, _WORKING, str, project_id=project_id, now=now))
