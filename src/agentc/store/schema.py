"""The coordinator's tables (SQLAlchemy Core). Times are integer ms since the epoch.

One definition serves SQLite and PostgreSQL; migrations in `agentc/store/migrations` create
exactly these tables, and a test checks the two never drift apart.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

Id = String(64)
Ms = BigInteger

principals = Table(
    "principals",
    metadata,
    Column("id", Id, primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("kind", String(16), nullable=False),  # human | agent
    Column("role", String(16), nullable=False),  # admin | operator | agent
    Column("password_hash", Text),
    Column("disabled_at", Ms),
    Column("created_at", Ms, nullable=False),
    # The name as names are compared (agentc.core.rules.fold_name): unique, so `ADMIN2` cannot
    # stand beside `admin2`. The default only serves the migration that added it (0007).
    Column("name_key", String(100), nullable=False, server_default=text("''")),
    Index("ux_principals_name_key", "name_key", unique=True),
)

credentials = Table(
    "credentials",
    metadata,
    Column("id", Id, primary_key=True),
    Column("principal_id", Id, ForeignKey("principals.id"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("name", String(100), nullable=False),
    Column("class", String(16), nullable=False),
    Column("access", String(8), nullable=False),
    Column("issued_by", Id),
    Column("created_at", Ms, nullable=False),
    Column("revoked_at", Ms),
    # Set for an attempt credential (class `attempt`): the one attempt it is bound to.
    Column("attempt_id", Id),
    Index("ix_credentials_attempt", "attempt_id"),
)

# The projects a principal may reach, with its role in each (admins need none: they have every
# project). The one check is agentc.service.auth.require_project.
project_grants = Table(
    "project_grants",
    metadata,
    Column("principal_id", Id, ForeignKey("principals.id"), primary_key=True),
    Column("project_id", Id, ForeignKey("projects.id"), primary_key=True),
    Column("role", String(16), nullable=False),  # operator | viewer | agent
    Column("granted_by", Id),
    Column("created_at", Ms, nullable=False),
    Index("ix_project_grants_project", "project_id"),
)

browser_sessions = Table(
    "browser_sessions",
    metadata,
    Column("id", Id, primary_key=True),
    Column("principal_id", Id, ForeignKey("principals.id"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", Ms, nullable=False),
    Column("expires_at", Ms, nullable=False),
    Column("revoked_at", Ms),
    # The public origin the session was made at: it is good only there (None: made before
    # sessions recorded it, good nowhere).
    Column("origin", String(300)),
    # The authority epoch it was made under (migration 0010): a restore starts a new one.
    Column("authority_epoch", String(32), nullable=False, server_default=text("''")),
)

agent_sessions = Table(
    "agent_sessions",
    metadata,
    Column("id", Id, primary_key=True),
    Column("principal_id", Id, ForeignKey("principals.id"), nullable=False),
    Column("credential_id", Id, ForeignKey("credentials.id"), nullable=False),
    Column("proof_hash", String(64), nullable=False),
    Column("harness", String(200), nullable=False),
    Column("workstation_id", String(200)),
    Column("capabilities_json", Text, nullable=False),
    Column("created_at", Ms, nullable=False),
    Column("closed_at", Ms),
    # The authority epoch it was made under (migration 0010): a restore starts a new one.
    Column("authority_epoch", String(32), nullable=False, server_default=text("''")),
    # Agent text is screened for live session proofs by verifier (service/screening.py).
    Index("ix_agent_sessions_proof_hash", "proof_hash"),
)

projects = Table(
    "projects",
    metadata,
    Column("id", Id, primary_key=True),
    Column("name", String(120), nullable=False, unique=True),
    Column("repository_url", String(2048), nullable=False),
    Column("target_branch", String(255), nullable=False),
    Column("review_mode", String(16), nullable=False),
    Column("lease_seconds", Integer, nullable=False),
    Column("max_attempt_seconds", Integer, nullable=False),
    Column("required_checks_json", Text, nullable=False),
    # Agent-filed tasks go to the queue by themselves (within the weekly budget); otherwise
    # they are proposed and wait for a person's approval.
    Column("admit_agent_tasks", Boolean, nullable=False, server_default=text("false")),
    # A task whose attempts end without a submission this many times in a row is parked (and
    # until then backs off after each); 0: neither.
    Column("park_after_attempts", Integer, nullable=False, server_default=text("3")),
    Column("policy_revision", Integer, nullable=False),
    Column("created_at", Ms, nullable=False),
    Column("updated_at", Ms, nullable=False),
    # Fix-on-red (migration 0012): rounds a task gets after a required check fails on its
    # candidate, before a person is asked.
    Column("fix_rounds", Integer, nullable=False, server_default=text("2")),
)

tasks = Table(
    "tasks",
    metadata,
    Column("id", Id, primary_key=True),
    Column("project_id", Id, ForeignKey("projects.id"), nullable=False),
    Column("title", String(300), nullable=False),
    Column("description", Text, nullable=False),
    Column("acceptance_json", Text, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("lifecycle", String(16), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("current_attempt_id", Id),
    Column("blocked_reason", Text),
    Column("ready_since", Ms, nullable=False),
    Column("origin", String(16), nullable=False),  # human | agent
    Column("admission_class", String(32)),  # canary | None
    Column("budget_admitted_at", Ms),
    Column("budget_held_at", Ms),
    Column("proposed_at", Ms),  # held for a person's approval (the project admits no agent tasks)
    # Implementer attempts claimed since the last submission or a person's put-back.
    Column("tries", Integer, nullable=False, server_default=text("0")),
    Column("phase", String(24)),  # None | review | integration | revision_needed | done
    Column("current_submission_id", Id),
    Column("created_by", Id, nullable=False),
    Column("created_at", Ms, nullable=False),
    Column("updated_at", Ms, nullable=False),
    # Candidates sent back for a failed check since the task's last put-back (migration 0012).
    Column("red_rounds", Integer, nullable=False, server_default=text("0")),
    Index("ix_tasks_offer", "project_id", "lifecycle", "priority", "ready_since", "id"),
)

task_dependencies = Table(
    "task_dependencies",
    metadata,
    Column("task_id", Id, ForeignKey("tasks.id"), primary_key=True),
    Column("prerequisite_id", Id, ForeignKey("tasks.id"), primary_key=True),
    Index("ix_task_dependencies_prerequisite", "prerequisite_id"),
)

attempts = Table(
    "attempts",
    metadata,
    Column("id", Id, primary_key=True),
    Column("project_id", Id, ForeignKey("projects.id"), nullable=False),
    Column("task_id", Id, ForeignKey("tasks.id"), nullable=False),
    Column("activity_id", Id),  # set for review attempts
    Column("owner_id", Id, ForeignKey("principals.id"), nullable=False),
    Column("session_id", Id, nullable=False),
    Column("credential_id", Id, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("task_revision", Integer, nullable=False),
    Column("policy_revision", Integer, nullable=False),
    Column("expires_at", Ms, nullable=False),
    Column("last_heartbeat_at", Ms, nullable=False),
    Column("last_progress_at", Ms, nullable=False),
    Column("created_at", Ms, nullable=False),
    Column("ended_at", Ms),
    Column("outcome", Text),
    Column("handoff", Text),
    # The fencing token's uniqueness: one attempt per generation of a task or activity.
    UniqueConstraint("task_id", "activity_id", "generation", name="uq_attempts_generation"),
    # At most one active attempt per task (work) and per activity (review), under any
    # concurrency: the database itself refuses a second.
    Index(
        "uq_attempts_active_work",
        "task_id",
        unique=True,
        sqlite_where=text("state = 'active' AND activity_id IS NULL"),
        postgresql_where=text("state = 'active' AND activity_id IS NULL"),
    ),
    Index(
        "uq_attempts_active_activity",
        "activity_id",
        unique=True,
        sqlite_where=text("state = 'active' AND activity_id IS NOT NULL"),
        postgresql_where=text("state = 'active' AND activity_id IS NOT NULL"),
    ),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("id", Id, primary_key=True),
    Column("attempt_id", Id, ForeignKey("attempts.id"), nullable=False, index=True),
    Column("summary", Text, nullable=False),
    Column("handoff", Text),
    Column("current_action", Text),
    Column("next_step", Text),
    Column("revision", String(64)),
    Column("created_at", Ms, nullable=False),
)

submissions = Table(
    "submissions",
    metadata,
    Column("id", Id, primary_key=True),
    Column("task_id", Id, ForeignKey("tasks.id"), nullable=False, index=True),
    Column("attempt_id", Id, ForeignKey("attempts.id"), nullable=False, unique=True),
    Column("kind", String(16), nullable=False),
    Column("task_revision", Integer, nullable=False),
    Column("summary", Text, nullable=False),
    Column("evidence_json", Text, nullable=False),
    Column("handoff", Text, nullable=False),
    Column("candidate_ref", String(512)),
    Column("candidate_revision", String(64)),
    Column("base_revision", String(64)),
    Column("ac_amendment_json", Text),
    Column("created_by", Id, nullable=False),
    Column("session_id", Id, nullable=False),
    Column("created_at", Ms, nullable=False),
    Column("superseded_at", Ms),
)

activities = Table(
    "activities",
    metadata,
    Column("id", Id, primary_key=True),
    Column("project_id", Id, ForeignKey("projects.id"), nullable=False),
    Column("task_id", Id, ForeignKey("tasks.id"), nullable=False, index=True),
    Column("submission_id", Id, ForeignKey("submissions.id"), nullable=False),
    Column("kind", String(24), nullable=False),
    Column("state", String(16), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("current_attempt_id", Id),
    Column("queued_at", Ms, nullable=False),
    Column("created_at", Ms, nullable=False),
    Column("completed_at", Ms),
    Column("landed_revision", String(64)),
    # integration: the target the landing was built on; its checks, or why it was sent back
    Column("target_revision", String(64)),
    Column("outcome_json", Text),
    Index("ix_activities_queue", "project_id", "state", "kind"),
)

review_decisions = Table(
    "review_decisions",
    metadata,
    Column("id", Id, primary_key=True),
    Column("activity_id", Id, ForeignKey("activities.id"), nullable=False, unique=True),
    Column("submission_id", Id, ForeignKey("submissions.id"), nullable=False),
    Column("reviewer_id", Id, ForeignKey("principals.id"), nullable=False),
    Column("reviewer_kind", String(16), nullable=False),
    Column("decision", String(24), nullable=False),
    Column("summary", Text, nullable=False),
    Column("findings_json", Text, nullable=False),
    Column("amendment_decision", String(16)),
    Column("created_at", Ms, nullable=False),
)

work_artifacts = Table(
    "work_artifacts",
    metadata,
    Column("id", Id, primary_key=True),
    Column("project_id", Id, ForeignKey("projects.id"), nullable=False),
    Column("task_id", Id, ForeignKey("tasks.id"), nullable=False, index=True),
    Column("attempt_id", Id, ForeignKey("attempts.id"), nullable=False),
    Column("submission_id", Id, ForeignKey("submissions.id")),
    Column("kind", String(16), nullable=False),  # patch | steps
    Column("digest", String(80)),  # a patch's reviewed diff, sha256:<hex>
    Column("body_json", Text, nullable=False),
    Column("created_by", Id, nullable=False),
    Column("created_at", Ms, nullable=False),
    UniqueConstraint("attempt_id", "kind", name="uq_work_artifacts_attempt_kind"),
)

model_policies = Table(
    "model_policies",
    metadata,
    Column("subject_id", Id, primary_key=True),  # the project's id, or the task's
    Column("project_id", Id, ForeignKey("projects.id"), nullable=False, index=True),
    Column("task_id", Id, ForeignKey("tasks.id")),  # null: the project's own policy
    Column("policy_json", Text, nullable=False),  # agentc.core.model_policy.to_wire
    Column("revision", BigInteger, nullable=False),
    Column("updated_by", Id, nullable=False),
    Column("updated_at", Ms, nullable=False),
)

task_contributors = Table(
    "task_contributors",
    metadata,
    Column("task_id", Id, ForeignKey("tasks.id"), primary_key=True),
    Column("principal_id", Id, primary_key=True),
    Column("session_id", Id, primary_key=True),
    Column("first_contributed_at", Ms, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column(
        "seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("project_id", Id, index=True),
    Column("actor_id", Id),
    Column("credential_class", String(16)),
    Column("kind", String(64), nullable=False),
    Column("record_id", Id),
    Column("data_json", Text, nullable=False),
    Column("created_at", Ms, nullable=False),
    sqlite_autoincrement=True,
)

receipts = Table(
    "receipts",
    metadata,
    Column("principal_id", Id, primary_key=True),
    Column("operation", String(300), primary_key=True),
    Column("key", String(128), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("status", Integer, nullable=False),
    Column("body", Text),  # null once compacted after the retention period
    Column("created_at", Ms, nullable=False),
    # The agent credential that made the write (null for people and for receipts written
    # before 0004): only that credential may replay it.
    Column("credential_id", Id),
    # The authority epoch it was made under (migration 0010): a restore starts a new one.
    Column("authority_epoch", String(32), nullable=False, server_default=text("''")),
    # The receipts whose answers maintenance has yet to compact, oldest first
    # (agentc.store.compaction; migration 0010, which replaced the index of every receipt).
    Index(
        "ix_receipts_uncompacted",
        "created_at",
        sqlite_where=text("body IS NOT NULL"),
        postgresql_where=text("body IS NOT NULL"),
    ),
)

telemetry_rows = Table(
    "telemetry_rows",
    metadata,
    Column("project_id", Id, ForeignKey("projects.id"), primary_key=True),
    Column("stream", String(16), primary_key=True),  # cost | canary
    Column("host", String(255), primary_key=True),
    Column("identity", String(64), primary_key=True),
    Column("row_json", Text, nullable=False),
    Column("received_at", Ms, nullable=False),
    Column("principal_id", Id, nullable=False),
    # A cost row's attempt (migration 0012): where a landing's provenance finds the harness,
    # the models and the launch that served the attempt (the cost ledger).
    Column("attempt_id", Id),
    Index("ix_telemetry_rows_attempt", "attempt_id"),
)

# The sign-in throttle's failures (agentc.store.throttle), shared by every service process.
sign_in_failures = Table(
    "sign_in_failures",
    metadata,
    Column(
        "seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("address", String(64), nullable=False),
    Column("name", String(100), nullable=False),
    Column("failed_at", Ms, nullable=False),
    # The device cookie's id when the failure came with a valid one for the account (its own
    # lane), else None (the account's lane for every other client).
    Column("device", String(64)),
    Index("ix_sign_in_failures_address", "address", "failed_at"),
    Index("ix_sign_in_failures_failed_at", "failed_at"),
    Index("ix_sign_in_failures_name", "name", "failed_at"),
    Index("ix_sign_in_failures_device", "device", "failed_at"),
)

service_state = Table(
    "service_state",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

checkouts = Table(
    "checkouts",
    metadata,
    Column("attempt_id", Id, ForeignKey("attempts.id"), primary_key=True),
    Column("path", Text, nullable=False),
    Column("branch", String(255), nullable=False),
    Column("base_revision", String(64), nullable=False),
    Column("workstation_id", String(200)),
    Column("created_at", Ms, nullable=False),
)
