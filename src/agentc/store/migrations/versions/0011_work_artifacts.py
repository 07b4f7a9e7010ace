"""work artifacts: what an attempt produced, kept with it for the console

``work_artifacts`` holds, per attempt and kind, one artifact its supervisor recorded: the
``patch`` of a code submission (the reviewed diff's file list, its text when within the size
cap, and its ``sha256:`` digest) and the attempt's ``steps`` (docs/console.md, decision D45).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa

from agentc.store.migrations.ddl import adding, ident, ms, new_table, refers, string, text

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

work_artifacts = new_table(
    "work_artifacts",
    ident("id"),
    ident("project_id"),
    ident("task_id"),
    ident("attempt_id"),
    ident("submission_id", null=True),
    string("kind", 16),
    string("digest", 80, null=True),
    text("body_json"),
    ident("created_by"),
    ms("created_at"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("attempt_id", "kind", name="uq_work_artifacts_attempt_kind"),
    refers("project_id", "projects"),
    refers("task_id", "tasks"),
    refers("attempt_id", "attempts"),
    refers("submission_id", "submissions"),
    sa.Index("ix_work_artifacts_task_id", "task_id"),
)

upgrade, downgrade = adding(work_artifacts)
