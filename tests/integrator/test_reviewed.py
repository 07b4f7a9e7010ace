"""The real integrator against a real coordinator lands exactly what was reviewed, or lands
nothing and sends the candidate back: hostile histories built with real git (a side branch
hidden by a merge, a fork before the base, commits re-applying the base, a commit a rebase
drops as empty, an amended commit), the merge policy, an empty change, a base that is not on
the target, and a merge driver chosen by the candidate's own attributes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx

from tests.client.kit import git
from tests.integrator.kit import (
    PASS,
    Setup,
    Shape,
    amended,
    commit,
    empty_when_rebased,
    fork_before_base,
    holds,
    make_setup,
    raw_diff,
    revert_and_reapply_base,
    side_branch_merge,
)
from tests.kit.live import LiveServer


def _setup(tmp_path: Path, server: LiveServer, admin: httpx.Client, **config: Any) -> Setup:
    """A project whose base (the clone's main) has a parent, so a history can fork before it."""
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS, **config)
    s.advance({"base.txt": "the base's change\n"}, "the base")
    return s


def _run(s: Setup) -> None:
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def _lands(s: Setup, shape: Shape, move: dict[str, str] | None = None) -> dict[str, Any]:
    """``shape``'s candidate, approved (after the target moved, when ``move``), lands as one
    commit of the integrator's, exactly the reviewed change; evil.sh is nowhere on main."""
    sub = s.approved({}, shape=shape)
    before = s.push_to_target(move, "the target moves") if move else s.tip()
    _run(s)
    tip = s.tip()
    assert s.task(sub["task"]["id"])["work_status"] == "done", s.reports()
    assert s.landing(sub["task"]["id"])["landed_revision"] == tip
    s.lands_exactly(tip, before, sub["submission"])
    assert not holds(s.origin, "main", "evil.sh")
    assert git(s.origin, "show", f"{tip}:base.txt") == "the base's change"
    [report] = s.reports()
    assert report["event"] == "landed"
    assert report["reviewed_diff"] == s.trailers(tip)["Agentc-Reviewed-Diff"]
    return sub


def test_a_side_branch_hidden_by_a_merge_never_reaches_main(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = _setup(tmp_path, server, admin)
    sub = _lands(s, side_branch_merge)
    candidate = sub["submission"]["candidate_revision"]
    assert holds(s.origin, candidate, "evil.sh")  # the candidate's history does hold it
    assert git(s.origin, "rev-list", "--count", f"{candidate}^2") != "0"


def test_a_candidate_forked_before_its_base_is_sent_back(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = _setup(tmp_path, server, admin)
    before = s.tip()
    sub = s.approved({}, shape=fork_before_base)
    _run(s)
    assert s.tip() == before and not holds(s.origin, "main", "evil.sh")
    assert s.task(sub["task"]["id"])["work_status"] == "ready"
    back = s.landing(sub["task"]["id"])["sent_back"]
    candidate, base = sub["submission"]["candidate_revision"], sub["submission"]["base_revision"]
    assert back["reason_code"] == "candidate_invalid"
    assert back["reason"] == (
        f"the candidate {candidate} does not descend from its base revision {base}: what was "
        "reviewed (the diff from the base) is not what its history holds"
    )
    assert [r["event"] for r in s.reports()] == ["sent_back"]


def test_commits_re_applying_the_base_land_only_the_feature(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = _setup(tmp_path, server, admin)
    _lands(s, revert_and_reapply_base, move={"other.txt": "elsewhere\n"})


def test_a_commit_a_rebase_would_drop_as_empty(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    """Rebased, the candidate's first commit (README as the target makes it) would be dropped
    as empty and its second would revert the target's README; the landing keeps it."""
    s = _setup(tmp_path, server, admin)
    _lands(s, empty_when_rebased, move={"README": "hello world\n"})
    assert git(s.origin, "show", "main:README") == "hello world"


def test_an_amended_commit(server: LiveServer, admin: httpx.Client, tmp_path: Path):
    s = _setup(tmp_path, server, admin)
    _lands(s, amended)


def test_the_merge_policy_merges_the_reviewed_change_as_one_commit(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = _setup(tmp_path, server, admin, merge_policy="merge")
    sub = s.approved({}, shape=side_branch_merge)
    moved = s.push_to_target({"other.txt": "elsewhere\n"}, "the target moves")
    _run(s)
    tip = s.tip()
    first, second = git(s.origin, "rev-list", "--parents", "-n1", tip).split()[1:]
    base = sub["submission"]["base_revision"]
    assert first == moved
    assert git(s.origin, "rev-list", "--parents", "-n1", second).split()[1:] == [base]
    assert s.tree(second) == s.tree(sub["submission"]["candidate_revision"])
    assert s.trailers(second) == s.trailers(tip)
    assert set(git(s.origin, "rev-list", tip, f"^{moved}").split()) == {tip, second}
    assert not holds(s.origin, "main", "evil.sh")
    assert s.landing(sub["task"]["id"])["landed_revision"] == tip


def test_an_empty_change_lands_nothing_and_the_task_is_done(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    def there_and_back(wt: Path, base: str) -> None:
        commit(wt, {"README": "changed\n"}, "change")
        commit(wt, {"README": "hello\n"}, "change back")

    s = _setup(tmp_path, server, admin)
    sub = s.approved({}, shape=there_and_back)
    moved = s.push_to_target({"other.txt": "elsewhere\n"}, "the target moves")
    _run(s)
    assert s.tip() == moved  # nothing pushed
    assert s.task(sub["task"]["id"])["work_status"] == "done"
    landing = s.landing(sub["task"]["id"])
    assert (landing["landed_revision"], landing["target_revision"]) == (moved, moved)
    [report] = s.reports()
    assert report["event"] == "landed" and report["revision"] == moved
    assert report["reviewed_diff"] == "sha256:" + "e3b0c44298fc1c149afbf4c8996fb924" + (
        "27ae41e4649b934ca495991b7852b855"
    )


def test_a_base_that_is_not_on_the_target_is_sent_back(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = _setup(tmp_path, server, admin)
    before = s.tip()
    commit(s.clone, {"local.txt": "never pushed\n"}, "a commit only the clone has")
    sub = s.approved({"feature.txt": "x\n"})
    _run(s)
    assert s.tip() == before
    back = s.landing(sub["task"]["id"])["sent_back"]
    base = sub["submission"]["base_revision"]
    assert back["reason"] == f"the base revision {base} is not on the history of the target main"


def test_the_candidates_attributes_pick_no_merge_driver(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    """`* merge=union` in the candidate would merge two edits of one line into both lines;
    the integrator's merge reads no attributes: a conflict, sent back."""
    s = _setup(tmp_path, server, admin)
    lines = "".join(f"line {i}\n" for i in range(10))
    s.advance({"f": lines})
    before_edit = {"f": lines.replace("line 5\n", "line 5 by the candidate\n")}
    sub = s.approved({".gitattributes": "* merge=union\n", **before_edit})
    moved = s.push_to_target({"f": lines.replace("line 5\n", "line 5 by the target\n")})
    _run(s)
    assert s.tip() == moved
    back = s.landing(sub["task"]["id"])["sent_back"]
    assert back["reason_code"] == "conflict"
    assert "CONFLICT (content): Merge conflict in f" in back["reason"]


def test_a_change_the_target_already_holds_is_sent_back(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = _setup(tmp_path, server, admin)
    sub = s.approved({"feature.txt": "same\n"})
    moved = s.push_to_target({"feature.txt": "same\n"}, "someone made the same change")
    _run(s)
    assert s.tip() == moved
    back = s.landing(sub["task"]["id"])["sent_back"]
    assert back["reason"] == "the target already holds the reviewed change"
    [report] = s.reports()
    base, candidate = sub["submission"]["base_revision"], sub["submission"]["candidate_revision"]
    digest = hashlib.sha256(raw_diff(s.origin, base, candidate)).hexdigest()
    assert report["event"] == "sent_back" and report["reviewed_diff"] == f"sha256:{digest}"
