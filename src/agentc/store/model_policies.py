"""Model policies (decision D47): one row per project or task that has one."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.store.sql import fetch_row, insert, run, table


@table("model_policies", key="subject_id")
class PolicyRow(NamedTuple):
    subject_id: str  # the project's id (its own policy) or the task's
    project_id: str
    task_id: str | None
    policy_json: str
    revision: int
    updated_by: str
    updated_at: int


_SAVE = (
    "UPDATE model_policies SET policy_json = :policy_json, revision = :revision, "
    "updated_by = :updated_by, updated_at = :updated_at WHERE subject_id = :subject_id"
)


def policy_of(conn: Connection, subject_id: str) -> PolicyRow | None:
    return fetch_row(conn, PolicyRow, subject_id)


def save_policy(conn: Connection, row: PolicyRow) -> None:
    """Write ``row`` (a first revision is inserted, a later one replaces the row)."""
    if row.revision == 1:
        insert(conn, row)
    else:
        values = row._asdict()
        del values["project_id"], values["task_id"]
        run(conn, _SAVE, **values)
