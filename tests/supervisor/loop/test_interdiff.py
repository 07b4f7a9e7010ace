"""The interdiff a reviewer of a redone change reads, with real git: what the new candidate does
differently from the approved one, on the same base or put on a moved base."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentc.supervisor.loop.interdiff import approved_before, compute
from agentc.supervisor.loop.repo import update_mirror
from tests.client.kit import git, make_clone, workflow_view

REF = "refs/agent-coordinator/candidates/t1/{}"


def _commit(clone: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (clone / name).write_text(text)
        git(clone, "add", name)
    git(clone, "commit", "--quiet", "-m", message)
    return git(clone, "rev-parse", "HEAD")


def _publish(clone: Path, revision: str, name: str) -> dict[str, Any]:
    git(clone, "push", "--quiet", "origin", f"{revision}:{REF.format(name)}")
    return {"candidate_ref": REF.format(name), "candidate_revision": revision}


def _interdiff(
    root: Path, origin: Path, clone: Path, approved: tuple[str, str], new: tuple[str, str]
) -> dict[str, Any]:
    """Both candidates (revision, base) published; the interdiff computed in a mirror holding
    the new one, as the review loop's does."""
    mirror = root / "mirror.git"
    update_mirror(mirror, str(origin), "main")
    old = {**_publish(clone, approved[0], "l1"), "base_revision": approved[1]}
    under_review = {**_publish(clone, new[0], "l2"), "base_revision": new[1]}
    git(mirror, "fetch", "--quiet", "origin", f"{under_review['candidate_ref']}:refs/heads/new")
    return compute(mirror, "review-1", old, under_review)


def _lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]


def test_the_approved_then_sent_back_submission_is_found() -> None:
    subs: list[dict[str, Any]] = [{"id": f"s{n}", "candidate_ref": f"r{n}"} for n in (3, 2, 1)]
    reviews = [
        {"submission_id": "s2", "decision": "approved"},
        {"submission_id": "s1", "decision": "approved"},
    ]
    activities = [
        {"submission_id": "s2", "sent_back": {"reason_code": "conflict"}},
        {"submission_id": "s1", "sent_back": {"reason_code": "check_failed"}},
    ]
    found = approved_before(workflow_view(subs, reviews, activities), "s3")
    assert found is not None and found["id"] == "s2" and found["candidate_ref"] == "r2"
    activities[0]["sent_back"] = {"reason_code": "scan_finding"}  # not a redo
    found = approved_before(workflow_view(subs, reviews, activities), "s3")
    assert found is not None and found["id"] == "s1"
    subs[2]["candidate_ref"] = None  # the older one without a candidate: none to compare with
    assert approved_before(workflow_view(subs, reviews, activities), "s3") is None
    assert approved_before(workflow_view([{"id": "s3"}]), "s3") is None


def test_on_the_same_base_it_is_the_fix(tmp_path: Path) -> None:
    origin, clone = make_clone(tmp_path)
    base = git(clone, "rev-parse", "HEAD")
    first = _commit(clone, {"f.txt": "one\n"}, "the change")
    fixed = _commit(clone, {"g.txt": "the fix\n"}, "the fix")
    found = _interdiff(tmp_path, origin, clone, (first, base), (fixed, base))
    assert found["same_base"] is True and found["approved_candidate"] == first
    assert _lines(found["diff"]) == ["+the fix"]


def test_on_a_moved_base_the_target_s_changes_are_not_in_it(tmp_path: Path) -> None:
    origin, clone = make_clone(tmp_path)
    base = git(clone, "rev-parse", "HEAD")
    first = _commit(clone, {"f.txt": "one\ntwo\n"}, "the change")
    git(clone, "checkout", "--quiet", base)
    moved = _commit(clone, {"other.txt": "the target's\n", "f.txt": "target\n"}, "elsewhere")
    redone = _commit(clone, {"f.txt": "target\none\ntwo\n", "extra.txt": "x\n"}, "redone")
    found = _interdiff(tmp_path, origin, clone, (first, base), (redone, moved))
    assert found["same_base"] is False
    diff = found["diff"]
    assert "other.txt" not in diff  # the target's own change is not the implementer's
    assert "+x" in _lines(diff)  # what the redone candidate adds beyond the approved change
    assert any(line.startswith("-<<<<<<<") for line in _lines(diff))  # the conflict, resolved
