"""Project grants, admin-managed: which projects a principal may reach and its role there.

The check itself is `agentc.service.auth.require_project`, run by `authenticate` for every
route that names a project. Grants belong to the principal, so all of an agent's credentials
reach the same projects. Admins have every project and need no grant.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from agentc.core.model import PrincipalKind, ProjectRole
from agentc.core.rules import rfc3339
from agentc.service.auth import require_admin
from agentc.service.ops import JsonObject, Op, Result
from agentc.service.schemas import GrantIn
from agentc.service.work.refusals import invalid, missing
from agentc.service.work.views import project_row
from agentc.store import grants
from agentc.store.accounts import Principal
from agentc.store.audit import write_event
from agentc.store.grants import Grant
from agentc.store.sql import fetch_row

AGENT_ROLES = (ProjectRole.AGENT,)
PERSON_ROLES = (ProjectRole.OPERATOR, ProjectRole.VIEWER)


def grant(
    conn: Connection,
    now: int,
    principal: Principal,
    project_id: str,
    role: ProjectRole | None,
    granted_by: str | None,
    credential_class: str | None = None,
) -> str:
    """Grant the principal the project (with its kind's default role), audited; returns the
    role. The project must exist (404 otherwise)."""
    project_row(conn, project_id)
    is_agent = principal.kind == PrincipalKind.AGENT
    role = role or (ProjectRole.AGENT if is_agent else ProjectRole.OPERATOR)
    allowed = AGENT_ROLES if is_agent else PERSON_ROLES
    if role not in allowed:
        raise invalid(
            "role", f"a {principal.kind} may be granted {' or '.join(r.value for r in allowed)}"
        )
    row = Grant(principal.id, project_id, role.value, granted_by, now)
    if grants.set_grant(conn, row):
        write_event(
            conn,
            now,
            granted_by,
            credential_class,
            "project_granted",
            project_id,
            principal.id,
            {"principal": principal.name, "role": role.value},
        )
    return role.value


def grant_all(
    conn: Connection,
    now: int,
    principal: Principal,
    project_ids: list[str],
    granted_by: str | None,
) -> list[JsonObject]:
    """Grant each project (the same one twice is refused: a typo, not an intent)."""
    if len(set(project_ids)) != len(project_ids):
        raise invalid("projects", "a project is named twice")
    return [
        {"project_id": p, "role": grant(conn, now, principal, p, None, granted_by)}
        for p in project_ids
    ]


def _principal(op: Op, principal_id: str) -> Principal:
    row = fetch_row(op.conn, Principal, principal_id)
    if row is None:
        raise missing(f"no principal {principal_id}")
    return row


def grant_project(op: Op, principal_id: str, body: GrantIn) -> Result:
    require_admin(op.actor, "grant projects")
    principal = _principal(op, principal_id)
    role = grant(
        op.conn,
        op.now,
        principal,
        body.project_id,
        None if body.role is None else ProjectRole(body.role),
        op.actor.principal_id,
    )
    return Result(
        {"principal_id": principal_id, "project_id": body.project_id, "role": role},
        status=201,
    )


def revoke_project(op: Op, principal_id: str, project_id: str) -> Result:
    """Take the project away: the principal's next request about it is a 404 (an attempt it
    holds there lapses and is recovered like any other)."""
    require_admin(op.actor, "revoke projects")
    principal = _principal(op, principal_id)
    if grants.remove_grant(op.conn, principal_id, project_id):
        op.event("project_grant_revoked", project_id, principal_id, principal=principal.name)
    return Result({"principal_id": principal_id, "project_id": project_id, "granted": False})


def grants_view(conn: Connection, principal_id: str) -> JsonObject:
    if fetch_row(conn, Principal, principal_id) is None:
        raise missing(f"no principal {principal_id}")
    return {
        "items": [
            {
                "project_id": g.project_id,
                "role": g.role,
                "granted_by": g.granted_by,
                "granted_at": rfc3339(g.created_at),
            }
            for g in grants.grants_of(conn, principal_id)
        ]
    }
