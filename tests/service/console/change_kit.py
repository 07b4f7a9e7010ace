"""A code submission of a real change (tests.kit.changes) made by a loop's agent through the
API, and the patch its loop records: the change page's test material."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.supervisor.loop.patch import of_revisions
from tests.kit.changes import Change, make_change
from tests.service.kit import Caller, Service, claim, evidence


@dataclass
class Submitted:
    pid: str
    task: dict[str, Any]
    attempt: dict[str, Any]
    loop: Caller
    submission: dict[str, Any]
    change: Change

    @property
    def at(self) -> str:
        return f"/api/v1/projects/{self.pid}/attempts/{self.attempt['id']}"

    @property
    def page(self) -> str:
        return (
            f"/console/projects/{self.pid}/tasks/{self.task['id']}"
            f"/submissions/{self.submission['id']}"
        )


def launched(
    svc: Service, review_mode: str = "human"
) -> tuple[str, dict[str, Any], dict[str, Any], Caller, Caller]:
    """A code task claimed by a loop (its role's credential) and the launch's credential."""
    pid = svc.project(review_mode=review_mode)
    task = svc.task(pid, kind="code")
    loop = svc.agent(pid, credential_class="supervised")
    attempt = claim(loop, pid, task)["claim"]["attempt"]
    minted = loop.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/credentials",
        {"generation": attempt["generation"]},
    )
    launch = Caller(svc.client, {"Authorization": f"Bearer {minted['token']}"})
    return pid, task, attempt, loop, launch


def submitted(svc: Service, tmp_path: Path, review_mode: str = "human") -> Submitted:
    change = make_change(tmp_path / "repo")
    pid, task, attempt, loop, launch = launched(svc, review_mode)
    data = launch.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        {
            "generation": attempt["generation"],
            "kind": "code",
            "summary": "did it",
            "acceptance_evidence": evidence(["it works"]),
            "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/l1",
            "candidate_revision": change.candidate,
            "base_revision": change.base,
        },
    )
    return Submitted(pid, task, attempt, loop, data["submission"], change)


def patch_body(run: Submitted, cap: int = 1 << 20) -> dict[str, Any]:
    body = of_revisions(run.change.repo, run.change.base, run.change.candidate, cap)
    return {**body, "submission_id": run.submission["id"]}
