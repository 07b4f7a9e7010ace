"""attempt checkouts

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa

from agentc.store.migrations.ddl import adding, ident, ms, new_table, refers, string, text

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

checkouts = new_table(
    "checkouts",
    ident("attempt_id"),
    text("path"),
    string("branch", 255),
    string("base_revision", 64),
    string("workstation_id", 200, null=True),
    ms("created_at"),
    refers("attempt_id", "attempts"),
    sa.PrimaryKeyConstraint("attempt_id"),
)

upgrade, downgrade = adding(checkouts)
