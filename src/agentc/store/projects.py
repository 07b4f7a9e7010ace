"""Projects and their policy: rows and queries."""

from __future__ import annotations

from typing import NamedTuple, TypedDict

from sqlalchemy.engine import Connection

from agentc.store.sql import columns, fetch_all, fetch_exists, fetch_one, insert, update
from agentc.store.tx import Tx


class Project(NamedTuple):
    id: str
    name: str
    repository_url: str
    target_branch: str
    review_mode: str
    lease_seconds: int
    max_attempt_seconds: int
    required_checks_json: str
    policy_revision: int
    created_at: int
    updated_at: int


class PolicyChanges(TypedDict, total=False):
    repository_url: str
    target_branch: str
    review_mode: str
    lease_seconds: int
    max_attempt_seconds: int
    required_checks_json: str
    policy_revision: int
    updated_at: int


_SELECT = f"SELECT {columns(Project)} FROM projects"
_BY_ID = _SELECT + " WHERE id = :id"


def get_project(conn: Connection, project_id: str) -> Project | None:
    return fetch_one(conn, _BY_ID, Project, id=project_id)


def lock_project(tx: Tx, project_id: str) -> Project | None:
    return tx.lock(_BY_ID, Project, id=project_id)


def all_projects(conn: Connection) -> list[Project]:
    return fetch_all(conn, _SELECT + " ORDER BY name", Project)


def project_name_taken(conn: Connection, name: str) -> bool:
    return fetch_exists(conn, "SELECT id FROM projects WHERE name = :name", name=name)


def insert_project(conn: Connection, project: Project) -> None:
    insert(conn, "projects", project)


def update_project(conn: Connection, project_id: str, changes: PolicyChanges) -> None:
    update(conn, "projects", "id", project_id, changes)
