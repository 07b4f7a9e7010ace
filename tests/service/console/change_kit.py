"""A code submission of a real change (tests.kit.changes) made by a loop's agent through the
API, and the patch its loop records: the change page's test material."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.supervisor.loop.patch import of_revisions
from tests.kit.changes import HOSTILE, Change, make_change
from tests.kit.live import LiveServer
from tests.service.console.kit import Agent
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


def code_submission(
    task: dict[str, Any], attempt: dict[str, Any], change: Change, amend: list[str] | None = None
) -> dict[str, Any]:
    """The submission of a change for the task's claimed attempt (criterion "it works");
    ``amend``: it proposes these criteria instead, with evidence for them."""
    body = {
        "generation": attempt["generation"],
        "kind": "code",
        "summary": "did it",
        "acceptance_evidence": evidence(amend or ["it works"]),
        "candidate_ref": f"refs/agent-coordinator/candidates/{task['id']}/l1",
        "candidate_revision": change.candidate,
        "base_revision": change.base,
    }
    if amend:
        body["ac_amendment"] = {"new": amend, "rationale": "the criterion says too little"}
    return body


def submitted(svc: Service, tmp_path: Path, review_mode: str = "human") -> Submitted:
    change = make_change(tmp_path / "repo")
    pid, task, attempt, loop, launch = launched(svc, review_mode)
    data = launch.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        code_submission(task, attempt, change),
    )
    return Submitted(pid, task, attempt, loop, data["submission"], change)


def patch_body(run: Submitted, cap: int = 1 << 20) -> dict[str, Any]:
    body = of_revisions(run.change.repo, run.change.base, run.change.candidate, cap)
    return {**body, "submission_id": run.submission["id"]}


def steps_body(**more: Any) -> dict[str, Any]:
    return {
        "harness": "claude",
        "model": "claude-sonnet-5",
        "steps": [
            {"kind": "model", "name": "message", "detail": "I will add the greeting."},
            {"kind": "tool", "name": "Bash", "detail": "git commit -m greeting", "ok": True},
            {"kind": "tool", "name": "Bash", "detail": HOSTILE, "ok": False, "exit_code": 2},
            {"kind": "file", "name": "Write", "detail": "greeting.txt", "ok": True},
        ],
        "steps_dropped": 3,
        "ending": "submitted",
        "why": "the agent submitted its work; the launch exited with code 0",
        "started_at_ms": 1_800_000_000_000,
        "duration_ms": 125_000,
        "usd": 0.1234,
        "usd_estimated": False,
        "input_tokens": 1200,
        "cached_input_tokens": 300,
        "output_tokens": 40,
        **more,
    }


def submitted_live(
    server: LiveServer,
    tmp_path: Path,
    review_mode: str,
    *,
    steps: bool = False,
    change: Change | None = None,
    amend: list[str] | None = None,
) -> tuple[str, Any, Any]:
    """On a live server (the browser tests'): a code task of a new project, submitted with its
    patch by an agent (that agent's token is closed after); the project id, the task and the
    submission; ``steps``: the attempt's run is recorded too (``steps_body``); ``change``:
    that one instead of tests.kit.changes' (made under ``tmp_path``); ``amend``: the
    submission proposes these criteria (:func:`code_submission`)."""
    change = change or make_change(tmp_path / "repo")
    admin = server.admin_client()
    pid = admin.post(
        "/api/v1/projects",
        json={
            "name": f"diffs-{review_mode}",
            "repository_url": "https://git.example/d.git",
            "review_mode": review_mode,
        },
        headers={"Idempotency-Key": f"diffs-{review_mode}"},
    ).json()["data"]["id"]
    task = admin.post(
        f"/api/v1/projects/{pid}/tasks",
        json={"title": "Change things", "acceptance_criteria": ["it works"], "kind": "code"},
        headers={"Idempotency-Key": f"task-{review_mode}"},
    ).json()["data"]["task"]
    admin.close()
    with Agent(server, pid, name="implementer", credential_class="supervised") as agent:
        attempt = agent.post(
            f"/api/v1/projects/{pid}/claims", {"task_id": task["id"], "expected_task_revision": 1}
        )["claim"]["attempt"]
        at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
        body = code_submission(task, attempt, change, amend)
        sub = agent.post(f"{at}/submissions", body)["submission"]
        patch = of_revisions(change.repo, change.base, change.candidate, 1 << 20)
        agent.post(f"{at}/artifacts/patch", {**patch, "submission_id": sub["id"]})
        if steps:
            agent.post(f"{at}/artifacts/steps", steps_body())
    return pid, task, sub


def amended_live(
    server: LiveServer, pid: str, task: dict[str, Any], sub: dict[str, Any], change: Change
) -> Any:
    """On a live server, after ``submitted_live`` in a project an agent reviews: the reviewer
    requests changes, and the next attempt submits ``change`` (its next version) with its
    patch. Returns the new submission."""
    with Agent(server, pid, name="reviewer") as reviewer:
        flow = reviewer.client.get(f"/api/v1/projects/{pid}/tasks/{task['id']}/workflow")
        finding = {"severity": "required", "remedy": "return 3", "path": "app.py", "line": 2}
        agent_review(
            reviewer.post, pid, flow.json()["data"], sub["id"], "changes_requested", [finding]
        )
    with Agent(server, pid, name="implementer-2", credential_class="supervised") as agent:
        fresh = agent.client.get(f"/api/v1/projects/{pid}/tasks/{task['id']}").json()["data"]
        attempt = agent.post(
            f"/api/v1/projects/{pid}/claims",
            {"task_id": task["id"], "expected_task_revision": fresh["revision"]},
        )["claim"]["attempt"]
        at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
        body = code_submission(fresh, attempt, change)
        body["candidate_ref"] = f"refs/agent-coordinator/candidates/{task['id']}/l2"
        new = agent.post(f"{at}/submissions", body)["submission"]
        patch = of_revisions(change.repo, change.base, change.candidate, 1 << 20)
        agent.post(f"{at}/artifacts/patch", {**patch, "submission_id": new["id"]})
    return new


def agent_review(
    post: Callable[[str, Any], Any],
    project_id: str,
    flow: dict[str, Any],
    submission_id: str,
    decision: str,
    findings: list[dict[str, Any]],
    summary: str = "reviewed",
) -> None:
    """An agent reviewer (``post``: its API writes, returning the data) claims the agent review
    of the submission in the task's ``flow`` (its workflow as read) and records ``decision``."""
    act = next(a for a in flow["activities"] if a["kind"] == "agent_review")
    at = f"/api/v1/projects/{project_id}/workflow-activities/{act['id']}"
    held = post(f"{at}/claim", {"expected_submission_id": submission_id})
    post(
        f"{at}/review",
        {
            "generation": held["attempt"]["generation"],
            "submission_id": submission_id,
            "decision": decision,
            "summary": summary,
            "findings": findings,
        },
    )
