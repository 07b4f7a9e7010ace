"""gateway policy: the model policy of a project or of a task

``model_policies`` holds one row per project or task that has a model policy (decision D47):
the policy as JSON (``agentc.core.model_policy``: allowed models, output tokens per call, turns
and dollars per attempt), its revision for compare-and-set edits, who changed it and when.

Revision ID: 0013
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_policies",
        sa.Column("subject_id", sa.String(64), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("task_id", sa.String(64), sa.ForeignKey("tasks.id")),
        sa.Column("policy_json", sa.Text(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_model_policies_project_id", "model_policies", ["project_id"])


def downgrade() -> None:
    op.drop_index("ix_model_policies_project_id", table_name="model_policies")
    op.drop_table("model_policies")
