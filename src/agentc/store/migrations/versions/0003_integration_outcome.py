"""integration outcome: the target a landing was built on, and its checks or send-back reason

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("activities", sa.Column("target_revision", sa.String(length=64), nullable=True))
    op.add_column("activities", sa.Column("outcome_json", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("activities", "outcome_json")
    op.drop_column("activities", "target_revision")
