"""gateway policy: the model policy of a project or of a task

``model_policies`` holds one row per project or task that has a model policy (decision D47):
the policy as JSON (``agentc.core.model_policy``: allowed models, output tokens per call, turns
and dollars per attempt), its revision for compare-and-set edits, who changed it and when.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa

from agentc.store.migrations.ddl import adding, ident, ms, new_table, refers, text

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

model_policies = new_table(
    "model_policies",
    ident("subject_id"),
    ident("project_id"),
    ident("task_id", null=True),
    text("policy_json"),
    sa.Column("revision", sa.BigInteger(), nullable=False),
    ident("updated_by"),
    ms("updated_at"),
    sa.PrimaryKeyConstraint("subject_id"),
    refers("project_id", "projects"),
    refers("task_id", "tasks"),
    sa.Index("ix_model_policies_project_id", "project_id"),
)

upgrade, downgrade = adding(model_policies)
