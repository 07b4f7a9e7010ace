"""agent-filed tasks wait for a person; fruitless attempts back off

Projects get two policy settings: whether agent-filed tasks go to the queue by themselves
(`admit_agent_tasks`, off: they are proposed) and after how many fruitless attempts in a row a
task is parked (`park_after_attempts`). Tasks record when they were proposed and how many
implementer attempts were claimed since the last submission or a person's put-back (`tries`).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentc.store.migrations.ddl import counter, ms

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (a constant default fills the existing rows): a batch copy of projects
    # or tasks would have to drop a table other rows refer to.
    op.add_column(
        "projects",
        sa.Column(
            "admit_agent_tasks", sa.Boolean(), nullable=False, server_default=sa.text("false")
        ),
    )
    op.add_column("projects", counter("park_after_attempts", 3))
    op.add_column("tasks", ms("proposed_at", null=True))
    op.add_column("tasks", counter("tries", 0))


def downgrade() -> None:
    op.drop_column("tasks", "tries")
    op.drop_column("tasks", "proposed_at")
    op.drop_column("projects", "park_after_attempts")
    op.drop_column("projects", "admit_agent_tasks")
