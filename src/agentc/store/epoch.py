"""The authority epoch: which restore of the installation its sessions and receipts belong to.

``service_state['authority_epoch']`` ('' until the first restore) is read by the queries that
authenticate every request (:data:`CURRENT_EPOCH`, a subquery of the same statement) and
written into each agent session, browser session and idempotency receipt when it is made. A
restore (:mod:`agentc.service.restore`) gives the restored database a new epoch, so whatever
the snapshot held was made under another and is refused: by construction, not by a list of
what to revoke (docs/decisions.md D44).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from agentc.store.sql import fetch_one

KEY = "authority_epoch"
CURRENT_EPOCH = f"COALESCE((SELECT value FROM service_state WHERE key = '{KEY}'), '')"
"""The current epoch, as a subquery of a statement that needs it."""


def current(conn: Connection) -> str:
    found = fetch_one(conn, f"SELECT {CURRENT_EPOCH}", str)
    return found or ""
