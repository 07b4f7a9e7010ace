"""landing: the cost ledger by attempt, for a landing's provenance; fix-on-red rounds

``telemetry_rows.attempt_id`` names the attempt a cost row is about (the row's own
``attempt_id``, which the service checked when it accepted the row), indexed, so the integrator's
provenance read (docs/integrator.md, "Provenance") finds the harness, models and launch that
served an attempt without reading the project's whole ledger. Existing cost rows are filled in
from their JSON.

``projects.fix_rounds`` (default 2) is how many times a task whose candidate failed a required
check goes back to an implementer before a person is asked; ``tasks.red_rounds`` counts those
send-backs since the task's last put-back (docs/integrator.md, "Fix-on-red").

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

from agentc.store.migrations.ddl import counter, ident

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_FILL = {
    "sqlite": (
        "UPDATE telemetry_rows SET attempt_id = json_extract(row_json, '$.attempt_id') "
        "WHERE stream = 'cost' AND json_valid(row_json) "
        "AND json_type(row_json, '$.attempt_id') = 'text'"
    ),
    "postgresql": (
        "UPDATE telemetry_rows SET attempt_id = (row_json::jsonb ->> 'attempt_id') "
        "WHERE stream = 'cost' AND jsonb_typeof(row_json::jsonb -> 'attempt_id') = 'string'"
    ),
}


def upgrade() -> None:
    op.add_column("projects", counter("fix_rounds", 2))
    op.add_column("tasks", counter("red_rounds", 0))
    op.add_column("telemetry_rows", ident("attempt_id", null=True))
    op.create_index("ix_telemetry_rows_attempt", "telemetry_rows", ["attempt_id"], unique=False)
    op.execute(_FILL[op.get_bind().dialect.name])


def downgrade() -> None:
    op.drop_index("ix_telemetry_rows_attempt", table_name="telemetry_rows")
    op.drop_column("telemetry_rows", "attempt_id")
    op.drop_column("tasks", "red_rounds")
    op.drop_column("projects", "fix_rounds")
