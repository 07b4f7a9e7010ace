"""initial schema

The tables of the first release, spelled out here (frozen, like every revision): upgrade
creates them with their indexes, downgrade drops them.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentc.store.migrations.ddl import (
    ident,
    integer,
    ms,
    refers,
    serial,
    string,
    text,
    where,
)

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

tables = sa.MetaData()

sa.Table(
    "events",
    tables,
    serial("seq"),
    ident("project_id", null=True),
    ident("actor_id", null=True),
    string("credential_class", 16, null=True),
    string("kind", 64),
    ident("record_id", null=True),
    text("data_json"),
    ms("created_at"),
    sa.PrimaryKeyConstraint("seq"),
    sa.Index("ix_events_project_id", "project_id"),
    sqlite_autoincrement=True,
)
sa.Table(
    "principals",
    tables,
    ident("id"),
    string("name", 100),
    string("kind", 16),
    string("role", 16),
    text("password_hash", null=True),
    ms("disabled_at", null=True),
    ms("created_at"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("name"),
)
sa.Table(
    "projects",
    tables,
    ident("id"),
    string("name", 120),
    string("repository_url", 2048),
    string("target_branch", 255),
    string("review_mode", 16),
    integer("lease_seconds"),
    integer("max_attempt_seconds"),
    text("required_checks_json"),
    integer("policy_revision"),
    ms("created_at"),
    ms("updated_at"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("name"),
)
sa.Table(
    "receipts",
    tables,
    ident("principal_id"),
    string("operation", 300),
    string("key", 128),
    string("fingerprint", 64),
    integer("status"),
    text("body", null=True),
    ms("created_at"),
    sa.PrimaryKeyConstraint("principal_id", "operation", "key"),
    sa.Index("ix_receipts_created_at", "created_at"),
)
sa.Table(
    "service_state",
    tables,
    string("key", 64),
    text("value"),
    sa.PrimaryKeyConstraint("key"),
)
sa.Table(
    "browser_sessions",
    tables,
    ident("id"),
    ident("principal_id"),
    string("token_hash", 64),
    ms("created_at"),
    ms("expires_at"),
    ms("revoked_at", null=True),
    refers("principal_id", "principals"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("token_hash"),
)
sa.Table(
    "credentials",
    tables,
    ident("id"),
    ident("principal_id"),
    string("token_hash", 64),
    string("name", 100),
    string("class", 16),
    string("access", 8),
    ident("issued_by", null=True),
    ms("created_at"),
    ms("revoked_at", null=True),
    refers("principal_id", "principals"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("token_hash"),
)
sa.Table(
    "tasks",
    tables,
    ident("id"),
    ident("project_id"),
    string("title", 300),
    text("description"),
    text("acceptance_json"),
    string("kind", 16),
    integer("priority"),
    string("lifecycle", 16),
    integer("revision"),
    integer("generation"),
    ident("current_attempt_id", null=True),
    text("blocked_reason", null=True),
    ms("ready_since"),
    string("origin", 16),
    string("admission_class", 32, null=True),
    ms("budget_admitted_at", null=True),
    ms("budget_held_at", null=True),
    string("phase", 24, null=True),
    ident("current_submission_id", null=True),
    ident("created_by"),
    ms("created_at"),
    ms("updated_at"),
    refers("project_id", "projects"),
    sa.PrimaryKeyConstraint("id"),
    sa.Index("ix_tasks_offer", "project_id", "lifecycle", "priority", "ready_since", "id"),
)
sa.Table(
    "telemetry_rows",
    tables,
    ident("project_id"),
    string("stream", 16),
    string("host", 255),
    string("identity", 64),
    text("row_json"),
    ms("received_at"),
    ident("principal_id"),
    refers("project_id", "projects"),
    sa.PrimaryKeyConstraint("project_id", "stream", "host", "identity"),
)
sa.Table(
    "agent_sessions",
    tables,
    ident("id"),
    ident("principal_id"),
    ident("credential_id"),
    string("proof_hash", 64),
    string("harness", 200),
    string("workstation_id", 200, null=True),
    text("capabilities_json"),
    ms("created_at"),
    ms("closed_at", null=True),
    refers("credential_id", "credentials"),
    refers("principal_id", "principals"),
    sa.PrimaryKeyConstraint("id"),
)
sa.Table(
    "attempts",
    tables,
    ident("id"),
    ident("project_id"),
    ident("task_id"),
    ident("activity_id", null=True),
    ident("owner_id"),
    ident("session_id"),
    ident("credential_id"),
    integer("generation"),
    string("state", 16),
    string("mode", 16),
    integer("task_revision"),
    integer("policy_revision"),
    ms("expires_at"),
    ms("last_heartbeat_at"),
    ms("last_progress_at"),
    ms("created_at"),
    ms("ended_at", null=True),
    text("outcome", null=True),
    text("handoff", null=True),
    refers("owner_id", "principals"),
    refers("project_id", "projects"),
    refers("task_id", "tasks"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("task_id", "activity_id", "generation", name="uq_attempts_generation"),
    sa.Index(
        "uq_attempts_active_activity",
        "activity_id",
        unique=True,
        **where("state = 'active' AND activity_id IS NOT NULL"),
    ),
    sa.Index(
        "uq_attempts_active_work",
        "task_id",
        unique=True,
        **where("state = 'active' AND activity_id IS NULL"),
    ),
)
sa.Table(
    "task_contributors",
    tables,
    ident("task_id"),
    ident("principal_id"),
    ident("session_id"),
    ms("first_contributed_at"),
    refers("task_id", "tasks"),
    sa.PrimaryKeyConstraint("task_id", "principal_id", "session_id"),
)
sa.Table(
    "task_dependencies",
    tables,
    ident("task_id"),
    ident("prerequisite_id"),
    refers("prerequisite_id", "tasks"),
    refers("task_id", "tasks"),
    sa.PrimaryKeyConstraint("task_id", "prerequisite_id"),
    sa.Index("ix_task_dependencies_prerequisite", "prerequisite_id"),
)
sa.Table(
    "checkpoints",
    tables,
    ident("id"),
    ident("attempt_id"),
    text("summary"),
    text("handoff", null=True),
    text("current_action", null=True),
    text("next_step", null=True),
    string("revision", 64, null=True),
    ms("created_at"),
    refers("attempt_id", "attempts"),
    sa.PrimaryKeyConstraint("id"),
    sa.Index("ix_checkpoints_attempt_id", "attempt_id"),
)
sa.Table(
    "submissions",
    tables,
    ident("id"),
    ident("task_id"),
    ident("attempt_id"),
    string("kind", 16),
    integer("task_revision"),
    text("summary"),
    text("evidence_json"),
    text("handoff"),
    string("candidate_ref", 512, null=True),
    string("candidate_revision", 64, null=True),
    string("base_revision", 64, null=True),
    text("ac_amendment_json", null=True),
    ident("created_by"),
    ident("session_id"),
    ms("created_at"),
    ms("superseded_at", null=True),
    refers("attempt_id", "attempts"),
    refers("task_id", "tasks"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("attempt_id"),
    sa.Index("ix_submissions_task_id", "task_id"),
)
sa.Table(
    "activities",
    tables,
    ident("id"),
    ident("project_id"),
    ident("task_id"),
    ident("submission_id"),
    string("kind", 24),
    string("state", 16),
    integer("generation"),
    ident("current_attempt_id", null=True),
    ms("queued_at"),
    ms("created_at"),
    ms("completed_at", null=True),
    string("landed_revision", 64, null=True),
    refers("project_id", "projects"),
    refers("submission_id", "submissions"),
    refers("task_id", "tasks"),
    sa.PrimaryKeyConstraint("id"),
    sa.Index("ix_activities_queue", "project_id", "state", "kind"),
    sa.Index("ix_activities_task_id", "task_id"),
)
sa.Table(
    "review_decisions",
    tables,
    ident("id"),
    ident("activity_id"),
    ident("submission_id"),
    ident("reviewer_id"),
    string("reviewer_kind", 16),
    string("decision", 24),
    text("summary"),
    text("findings_json"),
    string("amendment_decision", 16, null=True),
    ms("created_at"),
    refers("activity_id", "activities"),
    refers("reviewer_id", "principals"),
    refers("submission_id", "submissions"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("activity_id"),
)


def upgrade() -> None:
    tables.create_all(op.get_bind(), checkfirst=False)


def downgrade() -> None:
    tables.drop_all(op.get_bind(), checkfirst=False)
