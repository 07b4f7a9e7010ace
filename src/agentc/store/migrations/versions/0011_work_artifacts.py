"""work artifacts: what an attempt produced, kept with it for the console

``work_artifacts`` holds, per attempt and kind, one artifact its supervisor recorded: the
``patch`` of a code submission (the reviewed diff's file list, its text when within the size
cap, and its ``sha256:`` digest) and the attempt's ``steps`` (docs/console.md, decision D45).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "work_artifacts",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("task_id", sa.String(64), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("attempt_id", sa.String(64), sa.ForeignKey("attempts.id"), nullable=False),
        sa.Column("submission_id", sa.String(64), sa.ForeignKey("submissions.id")),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("digest", sa.String(80)),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint("attempt_id", "kind", name="uq_work_artifacts_attempt_kind"),
    )
    op.create_index("ix_work_artifacts_task_id", "work_artifacts", ["task_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_work_artifacts_task_id", table_name="work_artifacts")
    op.drop_table("work_artifacts")
