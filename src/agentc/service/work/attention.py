"""The attention digest: what needs a human now in one project, and who sends it.

Read by the console's Attention page, and through `GET /api/v1/projects/{id}/attention` by
the people granted the project and by the agent designated as the project's digest sender (a
host command, `designate-digest-sender`, records which agent that is; it must hold a grant of
the project).
"""

from __future__ import annotations

import json
from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.core.model import ActivityKind, AttemptState, Hold, PrincipalKind, WorkStatus
from agentc.core.rules import iso_week_start_ms, rfc3339
from agentc.core.status import fruitless_attempts, parked, work_status
from agentc.service.auth import Actor, denied, require_admin
from agentc.service.ops import JsonObject
from agentc.service.work import spend
from agentc.service.work.refusals import missing
from agentc.service.work.views import hold_of, project_row, task_facts
from agentc.store import accounts, audit, grants, leases, projects, tasks, workflow
from agentc.store.accounts import Principal
from agentc.store.audit import write_event
from agentc.store.projects import Project
from agentc.store.sql import fetch_row
from agentc.store.tasks import Task
from agentc.store.workflow import Activity

RECENT_MS = 7 * spend.DAY_MS  # send-backs, landings and ended attempts this recent are listed
STALE_HOST_MS = 24 * 3600 * 1000  # a host silent this long is stale ...
FORGOTTEN_HOST_MS = 14 * spend.DAY_MS  # ... until it has been silent this long
LISTED = 50
HANDOFF_SHOWN = 600
PARKED_ATTEMPTS = 10  # a parked task's last attempts shown with it


def may_read(conn: Connection, actor: Actor, project_id: str) -> None:
    """The digest is for people: every person granted the project (admins have every project)
    reads it, as on the console's Attention page. An agent reads only the digest it is
    designated to send. The caller's grant of the project is checked before this."""
    if actor.is_human:
        return
    if projects.digest_sender(conn, project_id) == actor.principal_id:
        return
    raise denied("an agent reads a project's digest only when designated to send it")


def may_read_backups(conn: Connection, actor: Actor, project_id: str) -> None:
    """The installation's backup status is for the people who run the host (admins, as on the
    console's Backups page) and for the agent that pages them: the project's designated digest
    sender (``GET /projects/{p}/attention/backups``). The caller's grant is checked first."""
    if actor.is_human:
        require_admin(actor, "read the backup status")
    elif projects.digest_sender(conn, project_id) != actor.principal_id:
        raise denied("an agent reads the backup status only when designated to send the digest")


def read_view(conn: Connection, project_id: str) -> JsonObject | None:
    """When a person last read the project's digest, who, and how (None: never)."""
    read = projects.digest_read(conn, project_id)
    if read is None:
        return None
    who = fetch_row(conn, Principal, read.by)
    return {"at": rfc3339(read.at), "by": who.name if who else None, "via": read.via}


def record_read(conn: Connection, now: int, project_id: str, principal_id: str, via: str) -> None:
    """A read of the digest: a person opening the project's Attention page in the console
    (``via`` console) or pressing *I read this* behind a mailed link (``via`` link, the
    principal that minted the link). Nothing else counts (docs/attention.md); audited."""
    projects.record_digest_read(conn, project_id, projects.DigestRead(now, principal_id, via))
    write_event(conn, now, principal_id, None, "digest_read", project_id, project_id, {"via": via})


def sender_view(conn: Connection, project_id: str) -> JsonObject | None:
    sender_id = projects.digest_sender(conn, project_id)
    if sender_id is None:
        return None
    agent = fetch_row(conn, Principal, sender_id)
    name = agent.name if agent else None
    return {"agent_id": sender_id, "agent": name}


def digest(conn: Connection, project_id: str, now: int, weekly_budget: int) -> JsonObject:
    project = project_row(conn, project_id)
    titles = _Titles(conn, project_id)
    since = now - RECENT_MS
    found = _tasks(conn, project, now)
    required = [c["identity"] for c in json.loads(project.required_checks_json)]
    sections: JsonObject = {
        "proposed_tasks": found.proposed,
        "parked_tasks": found.parked,
        "blocked_tasks": found.blocked,
        "recovery_required": found.lapsed,
        "human_reviews": _reviews(conn, project_id),
        "send_backs": _send_backs(conn, project_id, since, titles),
        "unchecked_landings": _unchecked(conn, project_id, since, titles, required),
        "target_red": _target_red(conn, project_id, since),
        "flaky_checks": _flaky(conn, project_id, since),
        "ended_attempts": _ended(conn, project_id, since, titles),
        "stale_hosts": _stale_hosts(conn, project_id, now),
        "canary_failures": [
            c for c in spend.canary_report(conn, project_id, now)["latest"] if not c["passing"]
        ],
    }
    week = iso_week_start_ms(now)
    return {
        "project": {"id": project.id, "name": project.name},
        "generated_at": rfc3339(now),
        "recent_since": rfc3339(since),
        "digest_sender": sender_view(conn, project_id),
        "last_read": read_view(conn, project_id),
        "last_landing_at": _last_landing(conn, project_id),
        "needs_attention": sum(len(v) for v in sections.values()),
        **sections,
        "spend": {
            "last_24h": spend.spend_since(conn, project_id, now - spend.DAY_MS, now),
            "last_7d": spend.spend_since(conn, project_id, now - 7 * spend.DAY_MS, now),
            "agent_tasks": {
                "weekly_budget": weekly_budget,
                "admitted_this_week": tasks.agent_tasks_admitted_since(conn, project_id, week),
                "week_start": rfc3339(week),
                "held": sum(t["held_for"] == Hold.WEEKLY_BUDGET for t in found.proposed),
            },
        },
    }


class _Titles:
    """Task titles, each read once."""

    def __init__(self, conn: Connection, project_id: str) -> None:
        self.conn, self.project_id = conn, project_id
        self.known: dict[str, str] = {}

    def __call__(self, task_id: str) -> str:
        if task_id not in self.known:
            task = tasks.get_project_task(self.conn, self.project_id, task_id)
            self.known[task_id] = task.title if task else ""
        return self.known[task_id]


class _Found(NamedTuple):
    proposed: list[JsonObject]
    parked: list[JsonObject]
    blocked: list[JsonObject]
    lapsed: list[JsonObject]


def _tasks(conn: Connection, project: Project, now: int) -> _Found:
    found = _Found([], [], [], [])
    limit = project.park_after_attempts
    for task in tasks.tasks_that_may_need_a_human(conn, project.id, limit, 4 * LISTED):
        facts = task_facts(conn, task, limit=limit)
        status = work_status(facts, now)
        item = {"task_id": task.id, "title": task.title, "priority": task.priority}
        if status == WorkStatus.PROPOSED:
            since = task.proposed_at or task.budget_held_at
            found.proposed.append({**item, "held_for": hold_of(task), "since": rfc3339(since)})
        elif parked(facts, now):
            count = fruitless_attempts(facts, now)
            found.parked.append(
                {**item, "fruitless_attempts": count, "attempts": _last_attempts(conn, task, count)}
            )
        elif status == WorkStatus.BLOCKED and task.blocked_reason:
            found.blocked.append({**item, "reason": task.blocked_reason})
        elif status == WorkStatus.RECOVERY_REQUIRED:
            found.lapsed.append({**item, "attempt_id": task.current_attempt_id})
    return _Found(*(items[:LISTED] for items in found))


def _last_attempts(conn: Connection, task: Task, count: int) -> list[JsonObject]:
    """How the task's last ``count`` attempts ended (at most PARKED_ATTEMPTS), newest first;
    one still active has lapsed (a parked task holds no attempt)."""
    return [
        {
            "attempt_id": a.id,
            "state": "lapsed" if a.state == AttemptState.ACTIVE else a.state,
            "outcome": a.outcome,
            "handoff": (a.handoff or "")[:HANDOFF_SHOWN] or None,
            "ended_at": rfc3339(a.expires_at if a.state == AttemptState.ACTIVE else a.ended_at),
        }
        for a in leases.attempts_of_task(conn, task.id, min(count, PARKED_ATTEMPTS))
    ]


def _reviews(conn: Connection, project_id: str) -> list[JsonObject]:
    kinds = [ActivityKind.HUMAN_REVIEW, ActivityKind.EITHER_REVIEW]
    return [
        {"activity_id": r.id, "task_id": r.task_id, "title": r.title, "kind": r.kind}
        for r in workflow.queued_reviews(conn, project_id, kinds, LISTED)
    ]


def _activity_events(
    conn: Connection, project_id: str, kind: str, since: int
) -> list[tuple[audit.Event, Activity]]:
    found = []
    for event in audit.recent_events(conn, project_id, [kind], since, LISTED):
        act = fetch_row(conn, Activity, event.record_id or "")
        if act is not None:
            found.append((event, act))
    return found


def _checks_of(act: Activity) -> tuple[JsonObject, list[JsonObject]]:
    outcome = json.loads(act.outcome_json) if act.outcome_json else {}
    return outcome, list(outcome.get("checks", []))


def _send_backs(conn: Connection, project_id: str, since: int, titles: _Titles) -> list[JsonObject]:
    found = []
    for event, act in _activity_events(conn, project_id, "integration.sent_back", since):
        outcome, checks = _checks_of(act)
        sent = outcome.get("sent_back") or {}
        found.append(
            {
                "activity_id": act.id,
                "task_id": act.task_id,
                "title": titles(act.task_id),
                "reason_code": sent.get("reason_code"),
                "reason": sent.get("reason"),
                "failed_checks": [c["name"] for c in checks if c.get("outcome") != "passed"],
                "at": rfc3339(event.created_at),
            }
        )
    return found


def _unchecked(
    conn: Connection, project_id: str, since: int, titles: _Titles, required: list[str]
) -> list[JsonObject]:
    """Landings whose recorded checks lack a required check of the policy (by name)."""
    if not required:
        return []
    found = []
    for event, act in _activity_events(conn, project_id, "integration.completed", since):
        _outcome, checks = _checks_of(act)
        passed = {c["name"] for c in checks if c.get("outcome") == "passed"}
        lacking = [name for name in required if name not in passed]
        if lacking:
            found.append(
                {
                    "activity_id": act.id,
                    "task_id": act.task_id,
                    "title": titles(act.task_id),
                    "landed_revision": act.landed_revision,
                    "missing_checks": lacking,
                    "at": rfc3339(event.created_at),
                }
            )
    return found


def _ended(conn: Connection, project_id: str, since: int, titles: _Titles) -> list[JsonObject]:
    return [
        {
            "attempt_id": a.id,
            "task_id": a.task_id,
            "title": titles(a.task_id),
            "state": a.state,
            "outcome": a.outcome,
            "handoff": (a.handoff or "")[:HANDOFF_SHOWN] or None,
            "ended_at": rfc3339(a.ended_at),
        }
        for a in leases.ended_attempts_since(conn, project_id, since, LISTED)
    ]


def _target_red(conn: Connection, project_id: str, since: int) -> list[JsonObject]:
    """The target branch failing its own checks, as the integrator last reported it, unless a
    landing came after (whose checks passed on a later target): integration waits meanwhile."""
    kinds = ["integration.target_red", "integration.completed"]
    latest = audit.recent_events(conn, project_id, kinds, since, 1)
    if not latest or latest[0].kind != "integration.target_red":
        return []
    data = json.loads(latest[0].data_json)
    return [
        {
            "target_revision": data.get("target_revision"),
            "failed_checks": data.get("failed_checks", []),
            "at": rfc3339(latest[0].created_at),
        }
    ]


def _flaky(conn: Connection, project_id: str, since: int) -> list[JsonObject]:
    """Each check that failed and then passed when run again, with how often, recently."""
    counts: dict[str, int] = {}
    last: dict[str, int] = {}
    for kind in ("integration.completed", "integration.sent_back"):
        for event, act in _activity_events(conn, project_id, kind, since):
            for name in {str(c.get("name")) for c in _checks_of(act)[1] if c.get("flaky")}:
                counts[name] = counts.get(name, 0) + 1
                last[name] = max(last.get(name, 0), event.created_at)
    return [
        {"name": name, "count": counts[name], "last_at": rfc3339(last[name])}
        for name in sorted(counts, key=lambda n: (-counts[n], n))
    ]


def _last_landing(conn: Connection, project_id: str) -> str | None:
    """When the integrator last landed a change in the project (the progress clock)."""
    found = audit.recent_events(conn, project_id, ["integration.completed"], 0, 1)
    return rfc3339(found[0].created_at) if found else None


def _stale_hosts(conn: Connection, project_id: str, now: int) -> list[JsonObject]:
    return [
        {"host": h.host, "last_seen": rfc3339(h.last_seen)}
        for h in audit.hosts_last_seen(conn, project_id)
        if STALE_HOST_MS < now - h.last_seen < FORGOTTEN_HOST_MS
    ]


def designate_sender(conn: Connection, now: int, project_id: str, agent: str | None) -> str:
    """The host's choice of the agent that sends the project's digest (None clears it);
    audited. Returns what was done, for the operator."""
    project = fetch_row(conn, projects.Project, project_id)
    if project is None:
        raise missing(f"no project {project_id}")
    if agent is None:
        projects.set_digest_sender(conn, project_id, None)
        write_event(conn, now, None, None, "digest_sender_cleared", project_id, project_id, {})
        return f"project {project.name} has no digest sender now"
    row = accounts.principal_by_name(conn, agent)
    if row is None or row.kind != PrincipalKind.AGENT:
        raise missing(f"no agent named {agent}")
    if row.disabled_at is not None:
        raise denied(f"the agent {agent} is disabled")
    if grants.role_in(conn, row.id, project_id) is None:
        raise denied(
            f"the agent {agent} is not granted project {project.name}: grant it the project"
            " (viewer is enough) before designating it"
        )
    projects.set_digest_sender(conn, project_id, row.id)
    write_event(
        conn,
        now,
        None,
        None,
        "digest_sender_designated",
        project_id,
        row.id,
        {"agent": agent, "via": "host"},
    )
    return f"agent {agent} sends the digest of project {project.name}"
