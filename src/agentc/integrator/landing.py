"""Build the commit that lands a reviewed change, from trees only, and prove it is that change.

The agent's own commits never enter the target's history. With ``base`` the revision the
change was reviewed on, ``candidate`` the reviewed revision and ``tip`` the target now:

1. R = a commit of the candidate's tree with the one parent ``base``: the reviewed change as
   one commit (its diff against its parent is, by definition, the reviewed diff).
2. The landing's tree: the candidate's when ``tip`` is ``base``; otherwise
   ``git merge-tree --write-tree tip R`` (``base`` is the one merge base: R's only parent, an
   ancestor of ``tip``), in the bare repository, so no attribute chooses how it merges.
3. Verify (:mod:`agentc.integrator.compare`): the change from ``tip`` to that tree must be
   exactly the reviewed change, or nothing lands.
4. Commit by policy: ``rebase`` one commit on ``tip``; ``merge`` a merge commit (``tip``, R);
   ``fast-forward`` only when ``tip`` is ``base`` (then R itself, for every policy).

The commits are made twice from the same trees and parents: first to be checked, then, once
the checks passed, with their results among the trailers (:func:`seal`). What is checked is
exactly the tree that lands.

The callers (the engine) have already checked that the candidate descends from ``base`` and
that ``base`` is on the target's history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentc.integrator.compare import first_difference, parse_raw, shown
from agentc.integrator.coordinator import Candidate
from agentc.integrator.message import (
    MERGE,
    ONE_COMMIT,
    PUT_ON_TARGET,
    Provenance,
    Served,
    message,
    reviewed_diff,
)
from agentc.integrator.repo import Merged, Repo

MOVED_FOR_FAST_FORWARD = (
    "the target moved since the candidate's base; fast-forward lands only changes built on the "
    "current target"
)


@dataclass(frozen=True)
class Commits:
    """How a landing's commits are made: R (the candidate's tree on ``base``), and on ``tip``
    either R itself (``shape`` ``reviewed``), one commit of ``tree`` (``put``) or a merge
    commit of ``tree`` with parents (``tip``, R) (``merge``)."""

    title: str
    provenance: Provenance
    candidate_tree: str
    base: str
    tip: str
    tree: str
    shape: str

    def make(self, repo: Repo, provenance: Provenance, *, sign: bool = False) -> str:
        """The landing's commit, its messages naming ``provenance`` (signed with ``sign``)."""
        title = self.title
        text = message(title, ONE_COMMIT, provenance)
        reviewed = repo.commit_tree(self.candidate_tree, [self.base], text, sign=sign)
        if self.shape == "reviewed":
            return reviewed
        if self.shape == "merge":
            text = message(title, MERGE, provenance)
            return repo.commit_tree(self.tree, [self.tip, reviewed], text, sign=sign)
        text = message(title, PUT_ON_TARGET, provenance)
        return repo.commit_tree(self.tree, [self.tip], text, sign=sign)


@dataclass(frozen=True)
class Landing:
    """The commit to check (``revision``), or why nothing lands (``reason``, with the send-back
    reason code). ``empty``: the reviewed change is empty, ``revision`` is the target itself.
    ``commits``: how to make the landing again once its checks passed (:func:`seal`)."""

    reviewed_diff: str
    revision: str | None = None
    reason: str = ""
    code: str = "conflict"
    empty: bool = False
    commits: Commits | None = None


def conflict_reason(repo: Repo, base: str, tip: str, merged: Merged) -> str:
    """Why the reviewed change no longer applies: the conflicting paths, the target's commits
    that changed them since the base (the other side), and git's messages."""
    paths = ", ".join(shown(p.encode(errors="surrogateescape")) for p in merged.paths[:20])
    theirs = repo.touched(base, tip, merged.paths)
    side = f" (changed on the target {tip} by {', '.join(theirs)})" if theirs else ""
    where = f" in {paths}{side}" if paths else ""
    return f"conflict with the target{where}: {merged.conflict}"


def provenance(
    cand: Candidate, raw: bytes, served: Served | None = None, scanned: str = ""
) -> Provenance:
    """What a landing of ``cand`` names, ``raw`` being its reviewed diff."""
    return Provenance(
        cand.task_id,
        cand.submission_id,
        cand.activity_id,
        cand.candidate_revision,
        cand.base_revision,
        reviewed_diff(raw),
        served,
        scanned=scanned,
    )


def build(
    repo: Repo,
    policy: str,
    cand: Candidate,
    tip: str,
    served: Served | None = None,
    scanned: str = "",
) -> Landing:
    """The landing of ``cand``'s reviewed change on ``tip`` under ``policy`` (``served`` and
    ``scanned``: the provenance and the pre-landing scan's verdict its trailers name)."""
    base, candidate = cand.base_revision, cand.candidate_revision
    raw = repo.diff_raw(base, candidate)
    ids = provenance(cand, raw, served, scanned)
    digest = ids.reviewed_diff
    reviewed = parse_raw(raw)
    if not reviewed:  # the change is empty: nothing to commit, the target is the landing
        return Landing(digest, tip, empty=True)
    if policy == "fast-forward" and tip != base:
        return Landing(digest, reason=MOVED_FOR_FAST_FORWARD)
    plan = Commits(cand.title, ids, repo.tree_of(candidate), base, tip, "", "reviewed")
    if tip == base:
        tree = plan.candidate_tree
    else:
        merged = repo.merge_trees(tip, plan.make(repo, ids))
        if merged.tree is None:
            return Landing(digest, reason=conflict_reason(repo, base, tip, merged))
        tree = merged.tree
    landed = parse_raw(repo.diff_raw(tip, tree))
    if not landed:
        return Landing(digest, reason="the target already holds the reviewed change")
    difference = first_difference(reviewed, landed, repo.blob, repo.patch)
    if difference:
        why = "on the current target the landed change would differ from the reviewed one: "
        return Landing(digest, reason=why + difference)
    shape = "reviewed" if tip == base else ("merge" if policy == "merge" else "put")
    plan = Commits(cand.title, ids, plan.candidate_tree, base, tip, tree, shape)
    return Landing(digest, plan.make(repo, ids), commits=plan)


def seal(repo: Repo, landing: Landing, checks: Sequence[Mapping[str, Any]]) -> str:
    """The checked landing made again with the checks among its trailers, and signed when the
    integrator has a signing key: the same trees and parents, so exactly what was checked
    lands. An empty change lands nothing (the target)."""
    if landing.commits is None:
        assert landing.revision is not None
        return landing.revision
    plan = landing.commits
    final = plan.make(repo, plan.provenance.with_checks(checks), sign=True)
    assert landing.revision is not None
    if repo.tree_of(final) != repo.tree_of(landing.revision):  # by construction; never trusted
        raise ValueError("the sealed landing's tree is not the checked one")
    return final
