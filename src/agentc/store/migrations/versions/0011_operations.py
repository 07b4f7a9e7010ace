"""operations: the authority epoch a restore changes

``agent_sessions``, ``browser_sessions`` and ``receipts`` record the authority epoch they were
made under (the ``service_state`` entry ``authority_epoch``; '' for an installation that was
never restored, and for every row made before this revision). A restore gives the restored
database a new epoch, so every session, lease (an attempt is held through its session) and
idempotency receipt of the snapshot belongs to the old one and is refused
(``request_from_previous_restore``): docs/decisions.md D44.

Revision ID: 0011
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLES = ("agent_sessions", "browser_sessions", "receipts")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table,
            sa.Column(
                "authority_epoch",
                sa.String(length=32),
                nullable=False,
                server_default=sa.text("''"),
            ),
        )


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("authority_epoch")
