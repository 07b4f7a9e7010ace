"""The change page and the patch artifact behind it, on SQLite and PostgreSQL: only the
attempt's own agent (its role's credential, never the launch's) records the patch, only of the
submission's own revisions, never with a secret; the page shows the files, a rename, a binary
and a folded large file, hunks with line numbers, escaped agent text, and both views."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentc.supervisor.loop.patch import of_revisions
from tests.kit.changes import HOSTILE, Change, git, make_change
from tests.service.console.change_kit import (
    code_submission,
    launched,
    patch_body,
    steps_body,
    submitted,
)
from tests.service.console.kit import browse_as
from tests.service.kit import ApiError, Service, claim


def test_the_loop_records_the_patch_and_the_page_shows_it(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path)
    body = patch_body(run)
    recorded = run.loop.post(f"{run.at}/artifacts/patch", body)
    assert recorded["digest"] == body["reviewed_diff"]
    read = run.loop.get(f"{run.at}/artifacts/patch")
    assert read["stats"]["files"] == 6 and read["patch"] == body["patch"]
    with pytest.raises(ApiError) as again:  # once per attempt
        run.loop.post(f"{run.at}/artifacts/patch", body)
    assert again.value.code == "artifact_exists"

    browse_as(svc, svc.admin)
    task_page = svc.client.get(f"/console/projects/{run.pid}/tasks/{run.task['id']}").text
    assert f'href="{run.page}">View the change' in task_page
    html = svc.client.get(run.page).text
    assert HOSTILE not in html and "&lt;script&gt;" in html  # agent text is escaped
    assert "old_name.txt → new_name.txt" in html
    assert "A binary file: its content is not shown." in html
    assert "6 files changed" in html and body["reviewed_diff"] in html
    large = re.search(
        r'<details class="file" id="file-(\d+)"( open)?>\s*<summary><span '
        r'class="fname">large.txt',
        html,
    )
    assert large and large.group(2) is None  # folded
    app = re.search(
        r'<details class="file" id="file-\d+" open>\s*<summary><span '
        r'class="fname">app.py',
        html,
    )
    assert app
    # line numbers: app.py's second line changed, old and new number 2
    assert re.search(r'<td class="ln">2</td><td class="ln"></td><td class="code del">', html)
    assert re.search(r'<td class="ln"></td><td class="ln">2</td><td class="code add">', html)
    assert '<span class="k">def</span>' in html  # highlighted on the server
    split = svc.client.get(run.page + "?view=split").text
    assert 'class="diff split"' in split
    assert re.search(
        r'<td class="ln">2</td><td class="code del">.*</td><td class="ln">2</td>'
        r'<td class="code add">',
        split,
    )


def test_a_file_becoming_a_link_keeps_every_hunk_shown(svc: Service, tmp_path: Path) -> None:
    """git's patch shows a type change as a deletion and a creation: the list has both, so the
    hunks still match their files (one type change used to hide the whole diff)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "x").write_text("was a file\n")
    (repo / "y").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "x").unlink()
    (repo / "x").symlink_to("y")
    (repo / "y").write_text("two\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "candidate")
    change = Change(repo, base, git(repo, "rev-parse", "HEAD"))
    pid, task, attempt, loop, launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    sub = launch.post(f"{at}/submissions", code_submission(task, attempt, change))["submission"]
    body = of_revisions(repo, change.base, change.candidate, 1 << 20)
    assert [(f["path"], f["status"]) for f in body["files"]] == [
        ("x", "deleted"), ("x", "added"), ("y", "modified")
    ]  # fmt: skip
    loop.post(f"{at}/artifacts/patch", {**body, "submission_id": sub["id"]})
    browse_as(svc, svc.admin)
    page = f"/console/projects/{pid}/tasks/{task['id']}/submissions/{sub['id']}"
    html = svc.client.get(page).text
    assert "do not match its file list" not in html
    assert "was a file" in html and "two" in html


def test_over_the_cap_the_page_lists_the_files(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path)
    run.loop.post(f"{run.at}/artifacts/patch", patch_body(run, cap=100))
    browse_as(svc, svc.admin)
    html = svc.client.get(run.page).text
    assert 'id="withheld"' in html and "over the cap of 100" in html
    assert "new_name.txt" in html and 'class="diff' not in html


def test_only_the_attempts_own_agent_records_its_patch(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path)
    body = patch_body(run)
    launch_token = svc.agent(run.pid)  # another agent of the project
    for caller, status in ((launch_token, 403), (svc.admin, 403)):
        resp = caller.raw("POST", f"{run.at}/artifacts/patch", body)
        assert resp.status_code == status, resp.text
    lie = {**body, "candidate_revision": "c" * 40}  # not the submission's candidate
    with pytest.raises(ApiError) as wrong:
        run.loop.post(f"{run.at}/artifacts/patch", lie)
    assert wrong.value.code == "revisions_mismatch"


def test_an_agent_on_its_own_credential_cannot_write_its_change(
    svc: Service, tmp_path: Path
) -> None:
    """An agent working with its own interactive credential (no loop) owns its attempt, yet a
    forged patch or steps record of it is refused: only a supervised loop records them."""
    change = make_change(tmp_path / "repo")
    pid = svc.project(review_mode="human")
    task = svc.task(pid, kind="code")
    agent = svc.agent(pid, credential_class="interactive")
    attempt = claim(agent, pid, task)["claim"]["attempt"]
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    sub = agent.post(f"{at}/submissions", code_submission(task, attempt, change))["submission"]
    forged = of_revisions(change.repo, change.base, change.candidate, 1 << 20)
    forged = {**forged, "submission_id": sub["id"], "files": [], "patch": "+typo fix\n"}
    resp = agent.raw("POST", f"{at}/artifacts/patch", forged)
    assert (resp.status_code, resp.json()["error"]["code"]) == (403, "operation_not_permitted")
    resp = agent.raw("POST", f"{at}/artifacts/steps", steps_body())
    assert resp.status_code == 403, resp.text


def test_the_launch_cannot_write_its_own_change(svc: Service, tmp_path: Path) -> None:
    """The agent whose work it is holds only its attempt credential: no artifact route."""
    change = make_change(tmp_path / "repo")
    pid, _task, attempt, _loop, launch = launched(svc)
    body = of_revisions(change.repo, change.base, change.candidate, 1 << 20)
    resp = launch.raw(
        "POST",
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/artifacts/patch",
        {**body, "submission_id": attempt["id"]},
    )
    assert (resp.status_code, resp.json()["error"]["code"]) == (403, "operation_not_permitted")


def test_a_secret_in_the_patch_is_refused_and_nothing_kept(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path)
    body = patch_body(run)
    key = svc.agent(run.pid).issued["token"]  # a live credential of this coordinator
    body["patch"] = body["patch"].replace("return 2", f"return '{key}'")
    resp = run.loop.raw("POST", f"{run.at}/artifacts/patch", body)
    assert resp.status_code == 422, resp.text
    assert key not in resp.text
    assert run.loop.raw("GET", f"{run.at}/artifacts/patch").status_code == 404
    # the loop then sends the list without the text, saying why
    body.update(patch=None, note="agentc-supervisor: the patch carried a secret")
    run.loop.post(f"{run.at}/artifacts/patch", body)
    browse_as(svc, svc.admin)
    assert "carried a secret" in svc.client.get(run.page).text


def test_the_landing_and_its_checks_beside_the_change(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path, review_mode="none")
    body = patch_body(run)
    run.loop.post(f"{run.at}/artifacts/patch", body)
    integrator = svc.agent(run.pid, credential_class="integrator", session=False)
    flow = svc.admin.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}/workflow")
    act = next(a for a in flow["activities"] if a["kind"] == "integration")
    integrator.post(
        f"/api/v1/projects/{run.pid}/workflow-activities/{act['id']}/landing",
        {
            "submission_id": run.submission["id"],
            "landed_revision": "d" * 40,
            "reviewed_diff": body["reviewed_diff"],
            "checks": [
                {
                    "name": "unit",
                    "outcome": "passed",
                    "exit_code": 0,
                    "command": "pytest -q",
                    "duration_ms": 2500,
                    "tail": f"12 passed {HOSTILE}",
                }
            ],
        },
    )
    browse_as(svc, svc.admin)
    html = svc.client.get(run.page).text
    assert 'id="landed-revision">' + "d" * 40 in html
    assert 'id="diff-matches"' in html
    assert "<code>pytest -q</code>" in html and "2.5 s" in html
    assert "12 passed &lt;script&gt;" in html
