"""sign-in failures: the throttle's record, shared by every service process

The sign-in throttle counted failures in each process's memory, so `serve --workers N` gave an
address N times the attempts. Failures are now rows (kept 15 minutes), read and written by
every process.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sign_in_failures",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("failed_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index(
        "ix_sign_in_failures_address", "sign_in_failures", ["address", "failed_at"], unique=False
    )
    op.create_index(
        "ix_sign_in_failures_failed_at", "sign_in_failures", ["failed_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_sign_in_failures_failed_at", table_name="sign_in_failures")
    op.drop_index("ix_sign_in_failures_address", table_name="sign_in_failures")
    op.drop_table("sign_in_failures")
