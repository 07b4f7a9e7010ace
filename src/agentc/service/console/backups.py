"""The console's backup page, for admins: what `agent-coordinator-server backup-status` prints,
read from the same repository by the same function (`agentc.service.backup.status`)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.responses import Response

from agentc.service import backup
from agentc.service.api import runtime_of
from agentc.service.auth import require_admin
from agentc.service.console.render import Viewer, page, router
from agentc.store.tx import Tx


@router.get("/console/backups")
async def backups_page(request: Request) -> Response:
    configured = runtime_of(request).settings.backup_repository

    def build(tx: Tx, v: Viewer) -> tuple[str, dict[str, Any]]:
        # Where the snapshots are and how old they are is for admins, who run the host.
        require_admin(v.actor, "see the backups")
        return "backups.html", {"status": backup_view(configured, tx.now)}

    return await page(request, build)


def backup_view(configured: str | None, now: int) -> dict[str, Any]:
    """The repository's status at the service's time, with ages and times for people; a
    repository that is not configured or cannot be read is a problem on the page."""
    found = backup.installation_status(configured, now)
    if not found["readable"]:
        return found
    newest, offsite = found["newest_snapshot"], found["offsite"]
    return {
        **found,
        **backup.times(found),
        "max_age_hours": backup.MAX_AGE_HOURS,
        "snapshot_age": None if newest is None else backup.age_text(found["snapshot_age_ms"]),
        "offsite_age": None if offsite is None else backup.age_text(found["offsite_age_ms"]),
    }
