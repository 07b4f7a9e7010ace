"""agent sessions: an index on the proof's verifier

The service looks the verifiers of token-shaped strings in agent text up among the live
secrets it keeps (docs/decisions.md D39); credentials and browser sessions had a unique index
on their verifiers, agent sessions' proofs had none, so each lookup read the whole table.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_agent_sessions_proof_hash", "agent_sessions", ["proof_hash"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_agent_sessions_proof_hash", table_name="agent_sessions")
