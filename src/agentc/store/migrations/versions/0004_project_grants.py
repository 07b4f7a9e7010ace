"""project grants: the projects each principal may reach; receipts name their credential

Existing deployments keep working: every principal that is not an admin is granted every
project that exists at the upgrade (agents with the agent role, people as operators), written
as ordinary grant rows an admin can revoke. Projects created later are granted explicitly.
See docs/decisions.md D27.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "project_grants",
        sa.Column("principal_id", sa.String(length=64), nullable=False),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("granted_by", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["principal_id"], ["principals.id"]),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"]),
        sa.PrimaryKeyConstraint("principal_id", "project_id"),
    )
    op.create_index("ix_project_grants_project", "project_grants", ["project_id"], unique=False)
    op.add_column("receipts", sa.Column("credential_id", sa.String(length=64), nullable=True))
    op.execute(
        sa.text(
            "INSERT INTO project_grants (principal_id, project_id, role, granted_by, created_at) "
            "SELECT p.id, j.id, CASE WHEN p.kind = 'agent' THEN 'agent' ELSE 'operator' END, "
            "NULL, :now FROM principals p CROSS JOIN projects j WHERE p.role <> 'admin'"
        ).bindparams(now=time.time_ns() // 1_000_000)
    )


def downgrade() -> None:
    op.drop_column("receipts", "credential_id")
    op.drop_index("ix_project_grants_project", table_name="project_grants")
    op.drop_table("project_grants")
