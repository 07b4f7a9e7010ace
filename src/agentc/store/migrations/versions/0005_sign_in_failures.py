"""sign-in failures: the throttle's record, shared by every service process

The sign-in throttle counted failures in each process's memory, so `serve --workers N` gave an
address N times the attempts. Failures are now rows (kept 15 minutes), read and written by
every process.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa

from agentc.store.migrations.ddl import adding, ms, new_table, serial, string

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

sign_in_failures = new_table(
    "sign_in_failures",
    serial("seq"),
    string("address", 64),
    string("name", 100),
    ms("failed_at"),
    sa.PrimaryKeyConstraint("seq"),
    sa.Index("ix_sign_in_failures_address", "address", "failed_at"),
    sa.Index("ix_sign_in_failures_failed_at", "failed_at"),
)

upgrade, downgrade = adding(sign_in_failures)
