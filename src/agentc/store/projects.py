"""Projects and their policy: rows and queries."""

from __future__ import annotations

import json
from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.store.service_state import delete_state, get_state, set_state
from agentc.store.sql import columns, fetch_all, fetch_exists, fetch_one, run, table


@table("projects")
class Project(NamedTuple):
    id: str
    name: str
    repository_url: str
    target_branch: str
    review_mode: str
    lease_seconds: int
    max_attempt_seconds: int
    required_checks_json: str
    admit_agent_tasks: bool  # (SQLite answers 0 or 1)
    park_after_attempts: int
    policy_revision: int
    created_at: int
    updated_at: int
    fix_rounds: int = 2  # (core.model.FIX_ROUNDS_DEFAULT)


_SELECT = f"SELECT {columns(Project)} FROM projects"
_BY_NAME = _SELECT + " ORDER BY name"
_NAME_TAKEN = "SELECT id FROM projects WHERE name = :name"
_SAVE_POLICY = (
    "UPDATE projects SET repository_url = :repository_url, target_branch = :target_branch, "
    "review_mode = :review_mode, lease_seconds = :lease_seconds, "
    "max_attempt_seconds = :max_attempt_seconds, required_checks_json = :required_checks_json, "
    "admit_agent_tasks = :admit_agent_tasks, park_after_attempts = :park_after_attempts, "
    "fix_rounds = :fix_rounds, "
    "policy_revision = :policy_revision, updated_at = :updated_at WHERE id = :id"
)


def all_projects(conn: Connection) -> list[Project]:
    return fetch_all(conn, _BY_NAME, Project)


def project_id_named(conn: Connection, name: str) -> str | None:
    return fetch_one(conn, _NAME_TAKEN, str, name=name)


def project_name_taken(conn: Connection, name: str) -> bool:
    return fetch_exists(conn, _NAME_TAKEN, name=name)


def save_project(conn: Connection, project: Project) -> None:
    """Write the project's settings and policy (its name and creation stay)."""
    values = project._asdict()
    del values["name"], values["created_at"]
    run(conn, _SAVE_POLICY, **values)


# Which agent sends a project's attention digest: a service_state entry per project (the key
# names the project, the value is the agent's principal id); no entry, no sender.
_SENDER_KEY = "digest_sender:{project_id}"


def digest_sender(conn: Connection, project_id: str) -> str | None:
    """The principal id of the agent designated to send the project's digest, if any."""
    return get_state(conn, _SENDER_KEY.format(project_id=project_id))


def set_digest_sender(conn: Connection, project_id: str, principal_id: str | None) -> None:
    key = _SENDER_KEY.format(project_id=project_id)
    if principal_id is None:
        delete_state(conn, key)
    else:
        set_state(conn, key, principal_id)


# The last read of a project's attention digest: a service_state entry per project holding
# {"at": ms, "by": principal id, "via": "console" | "link"}; no entry, never read.
_READ_KEY = "digest_read:{project_id}"


class DigestRead(NamedTuple):
    at: int
    by: str
    via: str


def digest_read(conn: Connection, project_id: str) -> DigestRead | None:
    raw = get_state(conn, _READ_KEY.format(project_id=project_id))
    if raw is None:
        return None
    data = json.loads(raw)
    return DigestRead(int(data["at"]), str(data["by"]), str(data["via"]))


def record_digest_read(conn: Connection, project_id: str, read: DigestRead) -> None:
    key = _READ_KEY.format(project_id=project_id)
    set_state(conn, key, json.dumps(read._asdict(), sort_keys=True))
