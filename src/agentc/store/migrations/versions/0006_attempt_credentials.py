"""attempt credentials: a credential bound to one attempt, for the launch working on it

An implementer launch held a copy of its role's long-lived credential. Now the supervisor mints
a credential for each attempt (class `attempt`), valid only while that attempt is active and
only for that attempt's own operations; `attempt_id` names the attempt.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

from agentc.store.migrations.ddl import ident

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("credentials", ident("attempt_id", null=True))
    op.create_index("ix_credentials_attempt", "credentials", ["attempt_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_credentials_attempt", table_name="credentials")
    op.drop_column("credentials", "attempt_id")
