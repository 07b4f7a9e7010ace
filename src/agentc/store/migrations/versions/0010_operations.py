"""operations: the authority epoch a restore changes

``agent_sessions``, ``browser_sessions`` and ``receipts`` record the authority epoch they were
made under (the ``service_state`` entry ``authority_epoch``; '' for an installation that was
never restored, and for every row made before this revision). A restore gives the restored
database a new epoch, so every session, lease (an attempt is held through its session) and
idempotency receipt of the snapshot belongs to the old one and is refused
(``request_from_previous_restore``): docs/decisions.md D44.

The index of every receipt by time becomes one of the receipts whose stored answer maintenance
has yet to compact (``body IS NOT NULL``): the compaction's batches stay a range scan however
many compacted receipts there are (nothing else reads receipts by time).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentc.store.migrations.ddl import where

revision = "0010"
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
    with op.batch_alter_table("receipts") as batch:
        batch.drop_index("ix_receipts_created_at")
        batch.create_index(
            "ix_receipts_uncompacted",
            ["created_at"],
            **where("body IS NOT NULL"),
        )


def downgrade() -> None:
    with op.batch_alter_table("receipts") as batch:
        batch.drop_index("ix_receipts_uncompacted")
        batch.create_index("ix_receipts_created_at", ["created_at"])
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("authority_epoch")
