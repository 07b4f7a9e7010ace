"""The landing is built from trees only and is exactly the reviewed change: every policy, a
moved and an unmoved target, every kind of entry, hostile histories and hostile attributes,
with real git (agentc.integrator.landing over the integrator's own repository)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentc.integrator.coordinator import Candidate
from agentc.integrator.landing import MOVED_FOR_FAST_FORWARD, Landing, build
from agentc.integrator.message import reviewed_diff
from agentc.integrator.repo import Repo
from tests.client.kit import git
from tests.integrator.kit import (
    FEATURE,
    Shape,
    amended,
    commit,
    empty_when_rebased,
    holds,
    raw_diff,
    revert_and_reapply_base,
    side_branch_merge,
)

REF = "refs/agent-coordinator/candidates/task-1/launch-1"
TWENTY = "".join(f"line {i}\n" for i in range(1, 21))
IDENTITY = ("agentc-integrator", "integrator@agentc.invalid")


@dataclass
class Lab:
    """A work repository (the remote) with a base that has a parent, and the integrator's
    private repository fetching from it."""

    work: Path
    private: Path
    base: str

    def candidate(self, shape: Shape) -> str:
        git(self.work, "checkout", "--quiet", "-B", "candidate", self.base)
        shape(self.work, self.base)
        revision = git(self.work, "rev-parse", "HEAD")
        git(self.work, "update-ref", REF, revision)
        git(self.work, "checkout", "--quiet", "--force", "main")
        return revision

    def move_target(self, files: dict[str, str | None]) -> str:
        return commit(self.work, files, "the target moves")

    def land(self, policy: str, candidate: str) -> tuple[Landing, str]:
        repo = Repo(self.private, str(self.work), "main", IDENTITY)
        repo.ensure()
        tip = repo.fetch_target()
        assert tip is not None
        assert repo.fetch_candidate(REF, "sub-1") == candidate
        cand = Candidate("task-1", "act-1", "sub-1", REF, candidate, self.base, "Add the feature")
        return build(repo, policy, cand, tip), tip

    def git(self, *args: str) -> str:
        return git(self.private, *args)


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    work = tmp_path / "work"
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(work)], check=True)
    git(work, "config", "user.email", "agent@example.invalid")
    git(work, "config", "user.name", "agent")
    files = {"README": "hello\n", "a.txt": "a\n", "run.sh": "#!/bin/sh\n", "f": TWENTY}
    commit(work, dict(files), "first")
    base = commit(work, {"base.txt": "the base's change\n"}, "the base")
    return Lab(work, tmp_path / "private", base)


def _gitlink(wt: Path, base: str) -> None:
    git(wt, "update-index", "--add", "--cacheinfo", f"160000,{base},vendor/lib")
    git(wt, "commit", "--quiet", "-m", "a submodule entry")


def _files(files: dict[str, str | None]) -> Shape:
    def shape(wt: Path, base: str) -> None:
        commit(wt, files, "c")

    return shape


def _renamed(wt: Path, base: str) -> None:
    git(wt, "mv", "a.txt", "b.txt")
    git(wt, "commit", "--quiet", "-m", "rename")


def _executable(wt: Path, base: str) -> None:
    git(wt, "update-index", "--chmod=+x", "run.sh")
    git(wt, "commit", "--quiet", "-m", "mode")


def _changed_back(wt: Path, base: str) -> None:
    commit(wt, {"a.txt": "b\n"}, "x")
    commit(wt, {"a.txt": "a\n"}, "y")


def _symlink(wt: Path, base: str) -> None:
    os.symlink("README", wt / "link")
    git(wt, "add", "link")
    git(wt, "commit", "--quiet", "-m", "a link")


def _binary(wt: Path, base: str) -> None:
    (wt / "blob.bin").write_bytes(bytes(range(256)) * 4)
    git(wt, "add", "blob.bin")
    git(wt, "commit", "--quiet", "-m", "a binary")


KINDS: dict[str, Shape] = {
    "added": _files(dict(FEATURE)),
    "deleted": _files({"a.txt": None}),
    "renamed": _renamed,
    "executable": _executable,
    "symlink": _symlink,
    "gitlink": _gitlink,
    "attributes": _files(
        {".gitattributes": "* merge=union\n* text eol=crlf filter=evil\n", **FEATURE}
    ),
    "binary": _binary,
    "edited": _files({"f": TWENTY.replace("line 15\n", "line fifteen\n")}),
}


def _check_landing(lab: Lab, landing: Landing, candidate: str, tip: str, policy: str) -> None:
    """The landing's change against the target is the reviewed diff, byte for byte (the target
    moved only elsewhere), made by the integrator, naming what was reviewed, and nothing of the
    candidate's own history is reachable from it."""
    rev = landing.revision
    assert rev is not None, landing.reason
    assert raw_diff(lab.private, tip, rev) == raw_diff(lab.private, lab.base, candidate)
    parents = lab.git("rev-list", "--parents", "-n1", rev).split()[1:]
    new = set(lab.git("rev-list", rev, f"^{tip}").split())
    if tip == lab.base:
        assert parents == [lab.base] and new == {rev}
    elif policy == "merge":
        assert parents[0] == tip and new == {rev, parents[1]}
        assert lab.git("rev-list", "--parents", "-n1", parents[1]).split()[1:] == [lab.base]
        assert lab.git("rev-parse", f"{parents[1]}^{{tree}}") == lab.git(
            "rev-parse", f"{candidate}^{{tree}}"
        )
    else:
        assert parents == [tip] and new == {rev}
    assert lab.git("log", "-1", "--format=%an <%ae>|%cn <%ce>", rev) == (
        "agentc-integrator <integrator@agentc.invalid>|" * 2
    ).rstrip("|")
    body = lab.git("log", "-1", "--format=%B", rev)
    assert body.startswith("Add the feature\n\n")
    trailers = dict(
        line.split(": ", 1)
        for line in lab.git("log", "-1", "--format=%(trailers)", rev).split("\n")
    )
    digest = reviewed_diff(raw_diff(lab.private, lab.base, candidate))
    assert trailers == {
        "Agentc-Task": "task-1",
        "Agentc-Submission": "sub-1",
        "Agentc-Activity": "act-1",
        "Agentc-Candidate": candidate,
        "Agentc-Base": lab.base,
        "Agentc-Reviewed-Diff": digest,
        # built without the coordinator's provenance (tests/integrator/test_provenance.py)
        **dict.fromkeys(
            (
                "Agentc-Attempt",
                "Agentc-Launch",
                "Agentc-Prompt",
                "Agentc-Scan",
                "Agentc-Harness",
                "Agentc-Model",
            ),
            "unrecorded",
        ),
    }
    assert landing.reviewed_diff == digest


@pytest.mark.parametrize("policy", ["rebase", "merge", "fast-forward"])
@pytest.mark.parametrize("moved", [False, True], ids=["unmoved", "moved"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_lands_exactly(lab: Lab, kind: str, moved: bool, policy: str):
    candidate = lab.candidate(KINDS[kind])
    if moved:
        lab.move_target({"target.txt": "elsewhere\n"})
    landing, tip = lab.land(policy, candidate)
    if moved and policy == "fast-forward":
        assert landing.revision is None and landing.reason == MOVED_FOR_FAST_FORWARD
        return
    _check_landing(lab, landing, candidate, tip, policy)


@pytest.mark.parametrize("policy", ["rebase", "merge", "fast-forward"])
@pytest.mark.parametrize("moved", [False, True], ids=["unmoved", "moved"])
def test_an_empty_change_lands_nothing(lab: Lab, moved: bool, policy: str):
    candidate = lab.candidate(_changed_back)
    if moved:
        lab.move_target({"target.txt": "elsewhere\n"})
    landing, tip = lab.land(policy, candidate)
    assert landing.empty and landing.revision == tip
    assert landing.reviewed_diff == reviewed_diff(b"")


@pytest.mark.parametrize("policy", ["rebase", "merge"])
def test_both_sides_edit_one_file_apart(lab: Lab, policy: str):
    candidate = lab.candidate(KINDS["edited"])
    tip_before = lab.move_target({"f": TWENTY.replace("line 2\n", "line two\n")})
    landing, tip = lab.land(policy, candidate)
    assert tip == tip_before and landing.revision is not None, landing.reason
    landed = lab.git("show", f"{landing.revision}:f") + "\n"
    assert landed == TWENTY.replace("line 2\n", "line two\n").replace("line 15\n", "line fifteen\n")


def test_a_change_near_the_targets_is_sent_back_not_guessed(lab: Lab):
    """Git merges edits two lines apart cleanly, but the landed hunk's surroundings are not the
    reviewed ones: a difference."""
    candidate = lab.candidate(_files({"f": TWENTY.replace("line 8\n", "line eight\n")}))
    lab.move_target({"f": TWENTY.replace("line 5\n", "line five\n")})
    landing, _ = lab.land("rebase", candidate)
    assert landing.revision is None
    assert landing.reason.endswith(
        "f: changed by the target too, and the landing's lines differ from the reviewed ones"
    )


def test_the_target_already_holding_the_change(lab: Lab):
    candidate = lab.candidate(_files(dict(FEATURE)))
    lab.move_target(dict(FEATURE))
    landing, _ = lab.land("rebase", candidate)
    assert (landing.revision, landing.reason) == (
        None,
        "the target already holds the reviewed change",
    )


def test_a_conflict_names_the_path(lab: Lab):
    candidate = lab.candidate(KINDS["edited"])
    lab.move_target({"f": TWENTY.replace("line 15\n", "line 15 on the target\n")})
    landing, _ = lab.land("merge", candidate)
    assert landing.revision is None
    assert landing.reason.startswith("conflict with the target in f (changed on the target ")


@pytest.mark.parametrize("whose", ["candidate", "target"])
def test_no_attribute_picks_the_merge_driver(lab: Lab, whose: str):
    """A `* merge=union` from either side would merge two edits of one line silently (shown
    below in a checkout of the candidate): the integrator's merge ignores it and conflicts."""
    union = {".gitattributes": "* merge=union\n"}
    mine = {"f": TWENTY.replace("line 10\n", "line 10 by the candidate\n")}
    theirs = {"f": TWENTY.replace("line 10\n", "line 10 by the target\n")}
    candidate = lab.candidate(_files({**mine, **(union if whose == "candidate" else {})}))
    tip = lab.move_target({**theirs, **(union if whose == "target" else {})})
    checkout = lab.work.parent / "checkout"
    git(
        lab.work,
        "worktree",
        "add",
        "--quiet",
        "--detach",
        str(checkout),
        candidate if whose == "candidate" else tip,
    )
    honoured = subprocess.run(
        ["git", "-C", str(checkout), "merge-tree", "--write-tree", tip, candidate],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert honoured.returncode == 0, "the attribute is honoured in a checkout"
    landing, _ = lab.land("rebase", candidate)
    assert landing.revision is None
    assert landing.reason.startswith("conflict with the target in f (")
    assert "CONFLICT (content): Merge conflict in f" in landing.reason


def test_attributes_in_the_private_repository_are_not_read(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Neither the home's attributes file nor the candidate's reach the merge: the private
    repository is bare and core.attributesFile is /dev/null."""
    home = tmp_path / "home"
    (home / ".config/git").mkdir(parents=True)
    (home / ".config/git/attributes").write_text("* merge=union\n")
    candidate = lab.candidate(_files({"f": TWENTY.replace("line 10\n", "ten (candidate)\n")}))
    lab.move_target({"f": TWENTY.replace("line 10\n", "ten (target)\n")})
    monkeypatch.setenv("HOME", str(home))  # git_env passes HOME on
    landing, _ = lab.land("rebase", candidate)
    assert landing.revision is None and "CONFLICT (content)" in landing.reason


HOSTILE = {
    "side branch merge": side_branch_merge,
    "revert and re-apply the base": revert_and_reapply_base,
    "empty when rebased": empty_when_rebased,
    "amended": amended,
}


@pytest.mark.parametrize("policy", ["rebase", "merge"])
@pytest.mark.parametrize("moved", [False, True], ids=["unmoved", "moved"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_history_lands_only_the_reviewed_change(
    lab: Lab, name: str, moved: bool, policy: str
):
    candidate = lab.candidate(HOSTILE[name])
    if moved:  # the target makes README what the "empty when rebased" shape's commit does
        lab.move_target({"README": "hello world\n"})
    landing, tip = lab.land(policy, candidate)
    _check_landing(lab, landing, candidate, tip, policy)
    assert landing.revision is not None
    assert not holds(lab.private, landing.revision, "evil.sh")
    assert lab.git("show", f"{landing.revision}:base.txt") == "the base's change"
    readme = lab.git("show", f"{landing.revision}:README")
    assert readme == ("hello world" if moved else "hello")


def test_an_earlier_versions_checked_out_repository_is_replaced(lab: Lab):
    """A work directory of an earlier version holds a non-bare repository (checked out for its
    rebases, reading that checkout's attributes): it is replaced by a bare one."""
    subprocess.run(["git", "init", "--quiet", str(lab.private)], check=True)
    (lab.private / ".gitattributes").write_text("* merge=union\n")
    repo = Repo(lab.private, str(lab.work), "main", IDENTITY)
    repo.ensure()
    assert not (lab.private / ".git").exists() and not (lab.private / ".gitattributes").exists()
    assert lab.git("rev-parse", "--is-bare-repository") == "true"
    assert repo.fetch_target() == lab.base
