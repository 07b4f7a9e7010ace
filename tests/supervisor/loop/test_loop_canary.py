"""``[run.canary_binding]`` with real parts: the loop asks the canary project for ``next`` first
each poll, clones it from its own mirror, submits there with its own binding and credential,
still polls the main project when the canary's ``next`` fails, settles a crashed canary
launch in the canary project, and takes reviews in both projects."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import httpx

from tests.client.kit import admin_project, issue_token, make_clone, write_credentials
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import HANGING_AGENT, SUBMITTING_AGENT, LoopKit, make_loop_kit
from tests.supervisor.loop.review_kit import PASSING_TEST, make_review_kit, submit


class Canary:
    def __init__(self, loop: LoopKit, root: Path) -> None:
        self.loop = loop
        self.project = admin_project(loop.admin)
        self.origin, _clone = make_clone(root / "canary-repo")
        token = issue_token(loop.admin, f"canary-{self.project[:6]}", self.project, "supervised")
        self.credentials = write_credentials(root / "canary-cred", loop.live.url, token)
        self.configure()

    def configure(self, credential: Path | None = None) -> None:
        self.loop.extra = (
            "[run.canary_binding]\n"
            f'service_url = "{self.loop.live.url}/"\n'  # a trailing slash is the same origin
            f'project_id = "{self.project}"\n'
            f'credential_file = "{credential or self.credentials}"\n'
            f"[setup.{self.project}]\n"
            f'repository_url = "{self.origin}"\n'
        )
        self.loop.write_config()

    def task(self, title: str = "canary: add a greeting") -> str:
        resp = self.loop.admin.post(
            f"/api/v1/projects/{self.project}/tasks",
            json={"title": title, "acceptance_criteria": ["greeting exists"]},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert resp.status_code == 201, resp.text
        task_id: str = resp.json()["data"]["task"]["id"]
        return task_id

    def status(self, task_id: str) -> str:
        resp = self.loop.admin.get(f"/api/v1/projects/{self.project}/tasks/{task_id}")
        data = resp.json()["data"]
        status: str = data.get("task", data)["work_status"]
        return status

    def handoff(self, attempt_id: str) -> str:
        resp = self.loop.admin.get(f"/api/v1/projects/{self.project}/attempts/{attempt_id}")
        handoff: str = resp.json()["data"]["attempt"]["handoff"] or ""
        return handoff


def _refs(origin: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(origin), "for-each-ref", "--format=%(refname)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [r for r in out.split() if r.startswith("refs/agent-coordinator/candidates/")]


def test_the_canary_project_is_asked_first_then_the_main_one(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    loop.run["launches"] = 1  # one launch a poll: the canary's first
    canary = Canary(loop, short_tmp)
    main_task = loop.task("main: older and ready first")
    canary_task = canary.task()
    first = loop.once()
    assert first.returncode == 0 and "exit_code: 0" in first.stderr, first.stderr
    assert canary.status(canary_task) == "waiting_review", loop.tails()
    assert loop.show(main_task["id"])["work_status"] == "ready"
    [final] = loop.records("finished")
    assert final["project"] == canary.project and final["task"] == canary_task
    assert final["canary"] is True  # as its launch's gateway grant, so its ledger rows
    # Cloned from its own mirror, published to its own repository.
    assert (loop.state / "mirror-canary.git/HEAD").exists()
    assert _refs(canary.origin) and not _refs(loop.origin)
    copy = (loop.state / "loop/coordinator-binding-canary.toml").read_text()
    assert canary.project in copy
    # The canary project has nothing left: the main project is served in the same poll.
    second = loop.once()
    assert second.returncode == 0 and "exit_code: 0" in second.stderr, second.stderr
    assert loop.show(main_task["id"])["work_status"] == "waiting_review", loop.tails()
    marks = {(r["project"], r["canary"]) for r in loop.records("finished")}
    assert marks == {(canary.project, True), (loop.project, False)}
    assert _refs(loop.origin)
    assert loop.records() == [] and loop.leftovers() == []


def test_a_failing_canary_next_still_polls_the_main_project(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    canary = Canary(loop, short_tmp)
    canary.task()
    # A credential file that cannot be read: the canary project's next fails.
    canary.configure(short_tmp / "missing-credentials.toml")
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert f"next (canary project {canary.project})" in result.stderr, result.stderr
    assert "missing-credentials.toml" in result.stderr, result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr
    assert loop.show(task["id"])["work_status"] == "waiting_review", loop.tails()
    # A credential the coordinator does not know fails it the same way.
    wrong = write_credentials(short_tmp / "wrong-cred", server.url, "agc_not_a_real_token")
    canary.configure(wrong)
    other = loop.task("another task")
    again = loop.once()
    assert again.returncode == 0, again.stderr
    assert f"next (canary project {canary.project}): authentication_required" in again.stderr
    assert loop.show(other["id"])["work_status"] == "waiting_review", loop.tails()


def test_a_crashed_canary_launch_is_settled_in_the_canary_project(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, HANGING_AGENT)
    canary = Canary(loop, short_tmp)
    canary_task = canary.task()
    proc = loop.start()
    try:
        record = loop.wait_for(lambda: [r for r in loop.records() if r.get("pid")])[0]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert record["project"] == canary.project
    loop.wait_for(lambda: not os.path.exists(f"/proc/{record['pid']}"))  # died with its loop
    assert canary.status(canary_task) == "in_progress"
    (loop.state / "kill-switch").touch()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert f"settled launch {record['launch_id']}" in result.stderr, result.stderr
    assert canary.status(canary_task) == "ready"
    assert "ended while no supervisor watched it" in canary.handoff(record["attempt"])
    assert loop.records() == [] and loop.leftovers() == []


def test_reviews_are_taken_in_the_canary_project_and_the_main_one(
    server: LiveServer, admin: httpx.Client, short_tmp: Path, account: str
) -> None:
    loop = make_review_kit(short_tmp, server, admin, account)
    canary_project = admin_project(admin)
    canary_origin, canary_clone = make_clone(short_tmp / "canary-repo")
    subprocess.run(["chown", "-R", f"{account}:{account}", str(canary_origin)], check=True)
    # One reviewer principal serves both projects.
    body = {
        "name": f"rev-both-{uuid.uuid4().hex[:6]}",
        "projects": [loop.project, canary_project],
        "credential_class": "supervised",
    }
    resp = admin.post(
        "/api/v1/admin/agents", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    assert resp.status_code == 201, resp.text
    creds = write_credentials(
        loop.state / "rev/coordinator", server.url, resp.json()["data"]["token"]
    )
    shutil.chown(creds, account, account)
    loop.extra = (
        "[run.canary_binding]\n"
        f'service_url = "{server.url}"\n'
        f'project_id = "{canary_project}"\n'
        f"[setup.{canary_project}]\n"
        f'repository_url = "{canary_origin}"\n'
    )
    loop.write_config()
    view = dataclasses.replace(
        loop, project=canary_project, origin=canary_origin, clone=canary_clone
    )
    in_canary = submit(view, PASSING_TEST, {"greeting.txt": "hi\n"})["task"]["id"]
    in_main = submit(loop, PASSING_TEST, {"greeting.txt": "hi\n"})["task"]["id"]
    result = loop.once()
    assert result.returncode == 0, result.stderr
    outcome = [x for x in result.stderr.splitlines() if "poll 1:" in x][0]
    # The canary project's review first, then the main project's, in one poll.
    assert outcome.index(f"Reviewed {{task: '{in_canary}'") < outcome.index(
        f"Reviewed {{task: '{in_main}'"
    ), outcome
    assert view.show(in_canary)["work_status"] == "waiting_integration"
    assert loop.show(in_main)["work_status"] == "waiting_integration"
    finals = {f["task"]: f for f in loop.records("finished")}
    assert finals[in_canary]["project"] == canary_project
    assert finals[in_canary]["outcome"] == "decided: approve"
    assert (loop.state / "mirror-canary.git/HEAD").exists()
    assert loop.records() == [] and loop.leftovers() == []
