"""console users: names unique without regard to case, sessions bound to their origin, the
sign-in throttle's device lanes

Three changes for the people and programs sharing a machine with the coordinator:

- ``principals.name_key``: the name with ASCII letters folded to lower case, unique, so
  ``ADMIN2`` cannot be made beside ``admin2``. An installation may already hold such pairs: the
  principal made first (then the smaller id) keeps its name, and each later one is renamed
  ``<name>-2`` (``-3``, ...: the first such name no principal has, without regard to case),
  nothing else about it changing (its kind, role, state, password, credentials and grants
  stay). Each renaming is a ``principal_renamed`` event and a line on standard error.
- ``browser_sessions.origin``: the public origin a session was made at; a session is good only
  there. Sessions made before this revision have none and are refused: people sign in again.
- ``sign_in_failures.device``: the device cookie a failed sign-in came with (its own lane of
  the throttle), and indexes for the per-account and per-device counts.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import json
import sys
import time

import sqlalchemy as sa
from alembic import op

from agentc.store.migrations.ddl import string

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

NAME_MAX = 100
_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _fold(name: str) -> str:
    return name.translate(_FOLD)


def _free_name(name: str, keys: set[str]) -> str:
    """``name-2``, ``name-3``, ...: the first whose folded form is not in keys."""
    n = 2
    while True:
        suffix = f"-{n}"
        candidate = name[: NAME_MAX - len(suffix)] + suffix
        if _fold(candidate) not in keys:
            return candidate
        n += 1


def _fold_names(conn: sa.engine.Connection) -> None:
    rows = conn.execute(sa.text("SELECT id, name FROM principals ORDER BY created_at, id")).all()
    keys = {_fold(name) for _id, name in rows}  # every name's, so no renaming takes one
    kept: set[str] = set()
    now = int(time.time() * 1000)
    for pid, name in rows:
        new = name
        if _fold(name) in kept:
            new = _free_name(name, keys)
            keys.add(_fold(new))
            data = {"from": name, "to": new, "why": "names are unique without regard to case"}
            conn.execute(
                sa.text(
                    "INSERT INTO events (project_id, actor_id, credential_class, kind, "
                    "record_id, data_json, created_at) VALUES (NULL, NULL, NULL, "
                    "'principal_renamed', :id, :data, :now)"
                ),
                {"id": pid, "data": json.dumps(data, sort_keys=True), "now": now},
            )
            sys.stderr.write(
                f"agentc migration 0007: renamed {name!r} to {new!r}: its name differs only in "
                "case from an older principal's, and names are now unique without regard to "
                "case\n"
            )
        kept.add(_fold(new))
        conn.execute(
            sa.text("UPDATE principals SET name = :name, name_key = :key WHERE id = :id"),
            {"name": new, "key": _fold(new), "id": pid},
        )


def upgrade() -> None:
    op.add_column(
        "principals",
        sa.Column("name_key", sa.String(length=100), nullable=False, server_default=sa.text("''")),
    )
    _fold_names(op.get_bind())
    op.create_index("ux_principals_name_key", "principals", ["name_key"], unique=True)
    op.add_column("browser_sessions", string("origin", 300, null=True))
    op.add_column("sign_in_failures", string("device", 64, null=True))
    op.create_index(
        "ix_sign_in_failures_name", "sign_in_failures", ["name", "failed_at"], unique=False
    )
    op.create_index(
        "ix_sign_in_failures_device", "sign_in_failures", ["device", "failed_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_sign_in_failures_device", table_name="sign_in_failures")
    op.drop_index("ix_sign_in_failures_name", table_name="sign_in_failures")
    op.drop_column("sign_in_failures", "device")
    op.drop_column("browser_sessions", "origin")
    op.drop_index("ux_principals_name_key", table_name="principals")
    op.drop_column("principals", "name_key")
