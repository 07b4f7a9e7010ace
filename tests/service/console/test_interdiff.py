"""What changed since the review: the change page of a submission that amends a reviewed one
shows the difference between the two recorded patches (on SQLite and PostgreSQL), computed by
the coordinator from the patches alone, the agent's text escaped, the work bounded, and a file
called unchanged only when that is known."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentc.service.console import interdiff
from agentc.service.console.interdiff import compare
from agentc.supervisor.loop.patch import of_revisions
from tests.kit.changes import AMENDED, HOSTILE, Change, amend_change, git, make_change
from tests.service.console.change_kit import (
    Submitted,
    agent_review,
    code_submission,
    patch_body,
    submitted,
)
from tests.service.console.kit import browse_as
from tests.service.kit import Caller, Service, claim

CAP = 1 << 20


def _patch(change: Change, cap: int = CAP) -> dict[str, Any]:
    return of_revisions(change.repo, change.base, change.candidate, cap)


def _commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _request_changes(svc: Service, run: Submitted) -> None:
    flow = svc.admin.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}/workflow")
    finding = {"severity": "required", "remedy": "return 3", "path": "app.py"}
    agent_review(
        svc.agent(run.pid).post, run.pid, flow, run.submission["id"], "changes_requested", [finding]
    )


def _amend(svc: Service, run: Submitted, change: Change, record: bool = True) -> str:
    """The loop claims the task again; its launch submits ``change``; the loop records its
    patch (unless not ``record``). Returns the new submission's change page."""
    svc.clock.advance(60)  # the next attempt comes later
    task = svc.admin.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}")
    attempt = claim(run.loop, run.pid, task)["claim"]["attempt"]
    at = f"/api/v1/projects/{run.pid}/attempts/{attempt['id']}"
    minted = run.loop.post(f"{at}/credentials", {"generation": attempt["generation"]})
    launch = Caller(svc.client, {"Authorization": f"Bearer {minted['token']}"})
    body = code_submission(task, attempt, change)
    body["candidate_ref"] = f"refs/agent-coordinator/candidates/{run.task['id']}/l2"
    sub = launch.post(f"{at}/submissions", body)["submission"]
    if record:
        run.loop.post(f"{at}/artifacts/patch", {**_patch(change), "submission_id": sub["id"]})
    return f"/console/projects/{run.pid}/tasks/{run.task['id']}/submissions/{sub['id']}"


def _since(html: str) -> str:
    found = re.search(r'<section class="card" id="since-review".*?</section>', html, re.S)
    assert found, "no Since the review section"
    return found.group(0)


def _label(section: str, path: str) -> str:
    found = re.search(
        rf"<li>(?:<a [^>]*>)?{re.escape(path)}(?:</a>)? <span class=\"fstatus\">([^<]*)</span>",
        section,
    )
    assert found, path
    return found.group(1)


def test_the_amended_submission_shows_what_changed_since_the_review(
    svc: Service, tmp_path: Path
) -> None:
    run = submitted(svc, tmp_path, review_mode="agent")
    run.loop.post(f"{run.at}/artifacts/patch", patch_body(run))
    _request_changes(svc, run)
    page = _amend(svc, run, amend_change(run.change))

    browse_as(svc, svc.admin)
    html = svc.client.get(page).text
    since = _since(html)
    first = f"/console/projects/{run.pid}/tasks/{run.task['id']}/submissions/"
    assert f'href="{first}{run.submission["id"]}">the submission of' in since
    assert "changes requested by an agent" in since and 'id="since-base"' not in since
    assert _label(since, "app.py") == "changed since the review"
    assert _label(since, "logo.png") == "changed since the review"  # its bytes, by blob id
    assert _label(since, "added.md") == "no longer changed: only in the reviewed patch"
    assert _label(since, "notes.txt") == "newly changed: not in the reviewed patch"
    for same in ("large.txt", "gone.txt", "old_name.txt → new_name.txt"):
        assert _label(since, same) == "unchanged", same
    # The reviewed line and its replacement, each marked, the agent's markup escaped.
    before = re.findall(r'<tr class="before"><td class="mark">(.*?)</tr>', since, re.S)
    after = re.findall(r'<tr class="after"><td class="mark">(.*?)</tr>', since, re.S)
    assert any("<code>+    return 2  # &lt;script&gt;alert(" in row for row in before)
    assert any(f"<code>+    {AMENDED} &lt;/table&gt;&lt;b&gt;" in row for row in after)
    assert HOSTILE not in html and "</table><b>" not in html
    # The reviewed submission's own page has nothing to compare with.
    assert 'id="since-review"' not in svc.client.get(first + run.submission["id"]).text


def test_a_patch_not_recorded_is_said_not_compared(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path, review_mode="agent")
    run.loop.post(f"{run.at}/artifacts/patch", patch_body(run))
    _request_changes(svc, run)
    page = _amend(svc, run, amend_change(run.change), record=False)
    browse_as(svc, svc.admin)
    since = _since(svc.client.get(page).text)
    assert "This submission's patch was not recorded" in since
    assert 'id="since-files"' not in since


def test_a_moved_hunk_is_the_same_and_a_rebased_index_line_is_not(tmp_path: Path) -> None:
    change = make_change(tmp_path / "repo")
    reviewed = _patch(change)
    repo = change.repo
    # the same candidate content on a base with lines added at the top of large.txt: the
    # hunks of app.py are identical, large.txt's moved (numbers differ) and its old blob too
    git(repo, "checkout", "--quiet", "-b", "rebased", change.base)
    (repo / "top.txt").write_text("target moved\n")
    base = _commit(repo, "target moved")
    git(repo, "checkout", "--quiet", change.candidate, "--", ".")
    candidate = _commit(repo, "candidate again")
    delta = compare(reviewed, _patch(Change(repo, base, candidate)))
    by = {f.path: f for f in delta.files}
    assert delta.compared and by["app.py"].what == "unchanged"
    assert by["large.txt"].what == "unchanged"


def test_a_file_is_unchanged_only_when_that_is_known(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    change = make_change(repo)
    (repo / "bytes.txt").write_bytes(b"caf\xe9\n")  # not UTF-8: recorded as U+FFFD
    first = Change(repo, change.base, _commit(repo, "latin-1"))
    (repo / "bytes.txt").write_bytes(b"caf\xe8\n")  # another byte, the same U+FFFD
    second = Change(repo, change.base, _commit(repo, "other byte"))
    a, b = _patch(first), _patch(second)
    assert _texts(a, "bytes.txt") == _texts(b, "bytes.txt")  # the text cannot tell them apart
    by = {f.path: f for f in compare(a, b).files}
    assert by["bytes.txt"].what == "changed"  # the blob ids can
    assert by["logo.png"].what == "unchanged"
    # A patch recorded before full blob ids (abbreviated): equal text is not proof.
    short_a, short_b = _abbreviated(repo, a, first), _abbreviated(repo, b, second)
    assert {f.path: f.what for f in compare(short_a, short_b).files}["bytes.txt"] == "changed"
    # ... and an agent that ground its blob id's abbreviation to the reviewed one's:
    forged = re.search(r"^index \S+", short_a["patch"].split("diff --git a/bytes.txt")[1], re.M)
    assert forged
    head, tail = short_b["patch"].split("diff --git a/bytes.txt", 1)
    tail = re.sub(r"^index \S+", forged.group(0), tail, count=1, flags=re.M)
    short_b = {**short_b, "patch": head + "diff --git a/bytes.txt" + tail}
    by = {f.path: f for f in compare(short_a, short_b).files}
    assert by["bytes.txt"].what == "unsure" and by["logo.png"].what == "unsure"
    assert by["app.py"].what == "unchanged"  # plain text lost nothing: its lines are proof


def _texts(patch: dict[str, Any], path: str) -> list[str]:
    section = patch["patch"].split(f"diff --git a/{path}")[1].split("diff --git")[0]
    return [line for line in section.splitlines() if not line.startswith("index ")]


def _abbreviated(repo: Path, patch: dict[str, Any], change: Change) -> dict[str, Any]:
    """The patch as the supervisor recorded it before ``--full-index``."""
    text = subprocess.run(
        ["git", "-C", str(repo), "diff-tree", "-r", "-p", "--no-color", "-M"]
        + [change.base, change.candidate],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", errors="replace")
    return {**patch, "patch": text}


def test_text_withheld_compares_the_file_lists(tmp_path: Path) -> None:
    change = make_change(tmp_path / "repo")
    amended = amend_change(Change(change.repo, change.base, change.candidate))
    delta = compare(_patch(change), _patch(amended, cap=100))
    assert not delta.compared and "over the cap of 100" in delta.why
    by = {f.path: f for f in delta.files}
    assert by["app.py"].what == "unknown" and by["notes.txt"].what == "added"
    assert by["added.md"].what == "dropped" and not any(f.rows for f in delta.files)


def test_the_comparison_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    change = make_change(tmp_path / "repo", large_lines=3000)
    repo = change.repo
    (repo / "large.txt").write_text("".join(f"Row {i}\n" for i in range(3000)))
    (repo / "app.py").write_text("changed\n")
    amended = Change(repo, change.base, _commit(repo, "again"))
    by = {f.path: f for f in compare(_patch(change), _patch(amended)).files}
    assert by["large.txt"].what == "too_large" and not by["large.txt"].rows  # 12,000 lines
    assert by["app.py"].what == "changed" and by["app.py"].rows
    # what is left of the page's budget goes to the files in order: app.py's 20 lines do not fit
    monkeypatch.setattr(interdiff, "PAGE_LINES", 10)
    by = {f.path: f for f in compare(_patch(change), _patch(amended)).files}
    assert by["app.py"].what == "too_large"
