"""Project grants: which projects a principal may reach, and its role in each."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.store.projects import Project
from agentc.store.sql import columns, fetch_all, fetch_one, insert, run, table


@table("project_grants", key=None)
class Grant(NamedTuple):
    principal_id: str
    project_id: str
    role: str  # a ProjectRole
    granted_by: str | None
    created_at: int


_ROLE = "SELECT role FROM project_grants WHERE principal_id = :p AND project_id = :j"
_OF = f"SELECT {columns(Grant)} FROM project_grants WHERE principal_id = :p ORDER BY project_id"
_PROJECTS_OF = (
    f"SELECT {columns(Project, 'j')} FROM projects j "
    "JOIN project_grants g ON g.project_id = j.id WHERE g.principal_id = :p ORDER BY j.name"
)
_ALL = (
    "SELECT g.principal_id, g.project_id, j.name, g.role FROM project_grants g "
    "JOIN projects j ON j.id = g.project_id ORDER BY j.name"
)
_SET_ROLE = (
    "UPDATE project_grants SET role = :role, granted_by = :by, created_at = :now "
    "WHERE principal_id = :p AND project_id = :j"
)
_REMOVE = "DELETE FROM project_grants WHERE principal_id = :p AND project_id = :j"


class NamedGrant(NamedTuple):
    principal_id: str
    project_id: str
    project_name: str
    role: str


def all_grants(conn: Connection) -> dict[str, list[NamedGrant]]:
    """Every grant with its project's name, by principal (the console's Access page)."""
    found: dict[str, list[NamedGrant]] = {}
    for g in fetch_all(conn, _ALL, NamedGrant):
        found.setdefault(g.principal_id, []).append(g)
    return found


def role_in(conn: Connection, principal_id: str, project_id: str) -> str | None:
    """The principal's role in the project, or None when it is not granted."""
    return fetch_one(conn, _ROLE, str, p=principal_id, j=project_id)


def grants_of(conn: Connection, principal_id: str) -> list[Grant]:
    return fetch_all(conn, _OF, Grant, p=principal_id)


def projects_of(conn: Connection, principal_id: str) -> list[Project]:
    """The projects granted to the principal, by name."""
    return fetch_all(conn, _PROJECTS_OF, Project, p=principal_id)


def set_grant(conn: Connection, grant: Grant) -> bool:
    """Grant the project (or change the role of an existing grant); False if it was already
    granted with that role."""
    current = role_in(conn, grant.principal_id, grant.project_id)
    if current == grant.role:
        return False
    if current is None:
        insert(conn, grant)
    else:
        run(
            conn,
            _SET_ROLE,
            role=grant.role,
            by=grant.granted_by,
            now=grant.created_at,
            p=grant.principal_id,
            j=grant.project_id,
        )
    return True


def remove_grant(conn: Connection, principal_id: str, project_id: str) -> bool:
    """Revoke the grant; False if there was none."""
    return run(conn, _REMOVE, p=principal_id, j=project_id) > 0
