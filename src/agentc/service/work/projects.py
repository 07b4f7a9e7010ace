"""Projects and their policy."""

from __future__ import annotations

import json
from typing import TypeVar

from agentc.service.auth import require_admin
from agentc.service.ops import Op, Result, new_id
from agentc.service.schemas import PolicyIn, ProjectIn
from agentc.service.work.refusals import conflict, invalid
from agentc.service.work.views import project_row, project_view
from agentc.store import projects
from agentc.store.projects import Project
from agentc.store.sql import insert

T = TypeVar("T")


def create_project(op: Op, body: ProjectIn) -> Result:
    """An admin creates a project (admins reach every project, so a name in use tells them
    nothing they cannot see); anyone else is refused before any name is looked at."""
    require_admin(op.actor, "create projects")
    if projects.project_name_taken(op.conn, body.name):
        raise conflict("project_exists", f"a project named {body.name!r} exists")
    _check_max_attempt(body.max_attempt_seconds)
    given = (
        body.name,
        body.repository_url,
        body.target_branch,
        body.review_mode,
        body.lease_seconds,
        body.max_attempt_seconds,
    )
    project = Project(
        new_id(),
        *given,
        required_checks_json=json.dumps([c.model_dump() for c in body.required_checks]),
        admit_agent_tasks=body.admit_agent_tasks,
        park_after_attempts=body.park_after_attempts,
        policy_revision=1,
        created_at=op.now,
        updated_at=op.now,
        fix_rounds=body.fix_rounds,
    )
    insert(op.conn, project)
    op.event("project.created", project.id, project.id, name=body.name)
    return Result(project_view(project), status=201)


def _check_max_attempt(value: int | None) -> None:
    if value is not None and value != 0 and value < 600:
        raise invalid("max_attempt_seconds", "0 (off) or 600 to 604800")


def update_policy(op: Op, project_id: str, body: PolicyIn) -> Result:
    require_admin(op.actor, "change a project's policy")
    row = op.tx.lock(Project, project_id)
    if row is None:
        project_row(op.conn, project_id)  # raises project_not_found
        raise AssertionError
    if body.expected_revision != row.policy_revision:
        raise conflict(
            "revision_conflict",
            f"the policy is at revision {row.policy_revision}, not {body.expected_revision}",
            current_revision=row.policy_revision,
        )
    _check_max_attempt(body.max_attempt_seconds)
    given = body.model_dump(exclude_none=True, exclude={"expected_revision"})
    checks = given.get("required_checks")
    current = {
        **row._asdict(),
        "required_checks": json.loads(row.required_checks_json),
        "admit_agent_tasks": bool(row.admit_agent_tasks),
    }
    changes = {name: value for name, value in given.items() if current[name] != value}
    updated = row._replace(
        repository_url=_given(body.repository_url, row.repository_url),
        target_branch=_given(body.target_branch, row.target_branch),
        review_mode=_given(body.review_mode, row.review_mode),
        lease_seconds=_given(body.lease_seconds, row.lease_seconds),
        max_attempt_seconds=_given(body.max_attempt_seconds, row.max_attempt_seconds),
        required_checks_json=row.required_checks_json if checks is None else json.dumps(checks),
        admit_agent_tasks=_given(body.admit_agent_tasks, bool(row.admit_agent_tasks)),
        park_after_attempts=_given(body.park_after_attempts, row.park_after_attempts),
        fix_rounds=_given(body.fix_rounds, row.fix_rounds),
        policy_revision=row.policy_revision + 1,
        updated_at=op.now,
    )
    projects.save_project(op.conn, updated)
    op.event("policy.updated", project_id, project_id, changes=changes)
    return Result(project_view(updated))


def _given(value: T | None, current: T) -> T:
    """The value a partial update gives, or the current one where it gives none."""
    return current if value is None else value
