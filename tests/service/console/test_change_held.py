"""A submission the integrator's pre-landing scan held for a person: the change page says so,
with the finding as escaped text."""

from __future__ import annotations

from pathlib import Path

from tests.kit.changes import HOSTILE
from tests.service.console.change_kit import patch_body, submitted
from tests.service.console.kit import browse_as
from tests.service.kit import Service


def test_the_page_shows_a_hold_and_its_finding(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path, review_mode="none")
    run.loop.post(f"{run.at}/artifacts/patch", patch_body(run))
    integrator = svc.agent(run.pid, credential_class="integrator", session=False)
    flow = svc.admin.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}/workflow")
    act = next(a for a in flow["activities"] if a["kind"] == "integration")
    reason = f"the pre-landing scan found 1 finding: a.md:1: {HOSTILE}"
    integrator.post(
        f"/api/v1/projects/{run.pid}/workflow-activities/{act['id']}/hold",
        {"submission_id": run.submission["id"], "reason": reason},
    )
    browse_as(svc, svc.admin)
    html = svc.client.get(run.page).text
    assert 'id="held"' in html and "The pre-landing scan held it for a person" in html
    assert "a.md:1: &lt;script&gt;" in html and HOSTILE not in html
