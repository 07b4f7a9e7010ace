"""Loading records and turning them into API objects (reads shared by every operation)."""

from __future__ import annotations

import json
from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.core.model import ActivityKind, AttemptState, Hold, Lifecycle
from agentc.core.rules import rfc3339
from agentc.core.status import (
    AttemptFacts,
    TaskFacts,
    backing_off,
    fruitless_attempts,
    offered_from,
    parked,
    work_status,
)
from agentc.service.ops import JsonObject
from agentc.service.work.refusals import not_found, project_not_found
from agentc.store import artifacts, leases, tasks, workflow
from agentc.store.leases import Attempt
from agentc.store.projects import Project
from agentc.store.sql import fetch_row
from agentc.store.tasks import Task
from agentc.store.workflow import Activity, ReviewDecision, Submission


def project_row(conn: Connection, project_id: str) -> Project:
    row = fetch_row(conn, Project, project_id)
    if row is None:
        raise project_not_found(project_id)
    return row


def task_row(conn: Connection, project_id: str, task_id: str) -> Task:
    row = tasks.get_project_task(conn, project_id, task_id)
    if row is None:
        raise not_found("task", task_id)
    return row


def _pick(row: NamedTuple, names: str) -> JsonObject:
    """The named fields of row, as they are stored."""
    values = row._asdict()
    return {name: values[name] for name in names.split()}


def project_view(row: Project) -> JsonObject:
    return {
        **_pick(row, "id name repository_url target_branch"),
        "policy": {
            "revision": row.policy_revision,
            **_pick(row, "review_mode lease_seconds max_attempt_seconds"),
            "required_checks": json.loads(row.required_checks_json),
            "admit_agent_tasks": bool(row.admit_agent_tasks),
            "park_after_attempts": row.park_after_attempts,
            "fix_rounds": row.fix_rounds,
        },
        "created_at": rfc3339(row.created_at),
        "updated_at": rfc3339(row.updated_at),
    }


def park_after(conn: Connection, project_id: str) -> int:
    """The project's limit of fruitless attempts in a row."""
    return project_row(conn, project_id).park_after_attempts


def task_facts(
    conn: Connection,
    task: Task,
    prerequisites: tasks.Prerequisites | None = None,
    *,
    limit: int | None = None,
) -> TaskFacts:
    """What the task's work status is judged from (its prerequisites read unless given; the
    project's limit of fruitless attempts, ``limit``, read unless given or unneeded)."""
    current = (
        None
        if task.current_attempt_id is None
        else fetch_row(conn, Attempt, task.current_attempt_id)
    )
    facts = None
    if current is not None:
        lost_at = leases.owner_lost_at(conn, current.id)
        facts = AttemptFacts(current.state, current.expires_at, lost_at)
    if limit is None:  # a task without a try neither backs off nor parks, whatever the limit
        limit = park_after(conn, task.project_id) if task.tries else 0
    done = (prerequisites or tasks.prerequisites(conn, task.id)).done
    return facts_of(task, facts, done, limit)


def facts_of(
    task: Task, current: AttemptFacts | None, prerequisites_done: bool, limit: int
) -> TaskFacts:
    return TaskFacts(
        lifecycle=task.lifecycle,
        phase=task.phase,
        blocked_reason=task.blocked_reason,
        current_attempt=current,
        prerequisites_done=prerequisites_done,
        held=hold_of(task) is not None,
        tries=task.tries,
        park_after=limit,
        ready_since=task.ready_since,
    )


def hold_of(task: Task) -> Hold | None:
    """Why the task waits for a person's approval, if it does (planned, filed by an agent)."""
    if task.lifecycle != Lifecycle.PLANNED:
        return None
    if task.proposed_at is not None:
        return Hold.APPROVAL
    return Hold.WEEKLY_BUDGET if task.budget_held_at is not None else None


def task_view(conn: Connection, task: Task, now: int, *, limit: int | None = None) -> JsonObject:
    prerequisites = tasks.prerequisites(conn, task.id)
    facts = task_facts(conn, task, prerequisites, limit=limit)
    return task_view_of(task, facts, prerequisites.ids, now)


def task_view_of(task: Task, facts: TaskFacts, depends_on: list[str], now: int) -> JsonObject:
    """The task as the API shows it, from what is already known of it."""
    status = work_status(facts, now)
    hold = hold_of(task)
    return {
        **_pick(task, "id project_id title description"),
        "acceptance_criteria": json.loads(task.acceptance_json),
        **_pick(task, "kind priority lifecycle"),
        "work_status": status.value,
        **_pick(task, "revision generation current_attempt_id current_submission_id phase"),
        "blocked_reason": task.blocked_reason,
        "depends_on": depends_on,
        **_pick(task, "origin admission_class"),
        "held_for": hold,
        "budget_held": hold == Hold.WEEKLY_BUDGET,
        "fruitless_attempts": fruitless_attempts(facts, now),
        "red_rounds": task.red_rounds,
        "parked": parked(facts, now),
        "offered_from": rfc3339(offered_from(facts)) if backing_off(facts, now) else None,
        "ready_since": rfc3339(task.ready_since),
        "created_at": rfc3339(task.created_at),
        "updated_at": rfc3339(task.updated_at),
    }


def attempt_view(row: Attempt, now: int) -> JsonObject:
    live = row.state == AttemptState.ACTIVE
    return {
        **_pick(row, "id project_id task_id activity_id owner_id session_id generation state mode"),
        "expires_at": rfc3339(row.expires_at),
        "lease_remaining_ms": max(0, row.expires_at - now) if live else 0,
        "last_heartbeat_at": rfc3339(row.last_heartbeat_at),
        "last_progress_at": rfc3339(row.last_progress_at),
        "created_at": rfc3339(row.created_at),
        "ended_at": rfc3339(row.ended_at),
        "outcome": row.outcome,
        "handoff": row.handoff,
    }


def submission_view(row: Submission) -> JsonObject:
    amendment = row.ac_amendment_json
    return {
        **_pick(row, "id task_id attempt_id kind task_revision summary"),
        "acceptance_evidence": json.loads(row.evidence_json),
        **_pick(row, "handoff candidate_ref candidate_revision base_revision"),
        "ac_amendment": json.loads(amendment) if amendment else None,
        "session_id": row.session_id,
        "created_at": rfc3339(row.created_at),
        "superseded_at": rfc3339(row.superseded_at),
    }


def activity_view(row: Activity) -> JsonObject:
    view: JsonObject = {
        **_pick(row, "id task_id submission_id kind state generation current_attempt_id"),
        "landed_revision": row.landed_revision,
        "created_at": rfc3339(row.created_at),
        "completed_at": rfc3339(row.completed_at),
    }
    if row.kind == ActivityKind.INTEGRATION:
        outcome = json.loads(row.outcome_json) if row.outcome_json else {}
        view["target_revision"] = row.target_revision
        view["checks"] = outcome.get("checks", [])
        view["sent_back"] = outcome.get("sent_back")
        view["held"] = outcome.get("held")
        view["reviewed_diff"] = outcome.get("reviewed_diff")
    return view


def decision_view(row: ReviewDecision) -> JsonObject:
    return {
        **_pick(row, "id activity_id submission_id reviewer_id reviewer_kind decision summary"),
        "findings": json.loads(row.findings_json),
        "amendment_decision": row.amendment_decision,
        "created_at": rfc3339(row.created_at),
    }


def workflow_view(conn: Connection, task: Task, now: int) -> JsonObject:
    subs = workflow.submissions_of_task(conn, task.id, 20)
    current = next((s for s in subs if s.id == task.current_submission_id), None)
    return {
        "phase": task.phase,
        "work_status": work_status(task_facts(conn, task), now).value,
        "submission": submission_view(current) if current else None,
        "submissions": [submission_view(s) for s in subs],
        "activities": [activity_view(a) for a in workflow.activities_of_task(conn, task.id, 50)],
        "reviews": [decision_view(d) for d in workflow.decisions_of_task(conn, task.id, 50)],
    }


def task_detail(conn: Connection, task: Task, now: int) -> JsonObject:
    recent = leases.attempts_of_task(conn, task.id, 50)
    told = artifacts.live_of_task(conn, task.id)
    return {
        **task_view(conn, task, now),
        "attempts": [_with_live(attempt_view(a, now), told.get(a.id)) for a in recent],
        "workflow": workflow_view(conn, task, now),
    }


def _with_live(view: JsonObject, told: JsonObject | None) -> JsonObject:
    """An active attempt's view with what its supervisor last told with a renewal (``live``:
    step, spent_usd, spent_tokens, at); null when nothing was told or it is no longer active."""
    live = None
    if told is not None and view["state"] == "active":
        live = {**{k: v for k, v in told.items() if k != "at_ms"}, "at": rfc3339(told["at_ms"])}
    return {**view, "live": live}
