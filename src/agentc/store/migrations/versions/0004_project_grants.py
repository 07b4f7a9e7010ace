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

from agentc.store.migrations.ddl import ident, ms, new_table, refers, string

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

project_grants = new_table(
    "project_grants",
    ident("principal_id"),
    ident("project_id"),
    string("role", 16),
    ident("granted_by", null=True),
    ms("created_at"),
    refers("principal_id", "principals"),
    refers("project_id", "projects"),
    sa.PrimaryKeyConstraint("principal_id", "project_id"),
    sa.Index("ix_project_grants_project", "project_id"),
)


def upgrade() -> None:
    project_grants.create(op.get_bind())
    op.add_column("receipts", ident("credential_id", null=True))
    op.execute(
        sa.text(
            "INSERT INTO project_grants (principal_id, project_id, role, granted_by, created_at) "
            "SELECT p.id, j.id, CASE WHEN p.kind = 'agent' THEN 'agent' ELSE 'operator' END, "
            "NULL, :now FROM principals p CROSS JOIN projects j WHERE p.role <> 'admin'"
        ).bindparams(now=time.time_ns() // 1_000_000)
    )


def downgrade() -> None:
    op.drop_column("receipts", "credential_id")
    project_grants.drop(op.get_bind())
