"""integration outcome: the target a landing was built on, and its checks or send-back reason

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

from agentc.store.migrations.ddl import string, text

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("activities", string("target_revision", 64, null=True))
    op.add_column("activities", text("outcome_json", null=True))


def downgrade() -> None:
    op.drop_column("activities", "outcome_json")
    op.drop_column("activities", "target_revision")
