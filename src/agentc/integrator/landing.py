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

The callers (the engine) have already checked that the candidate descends from ``base`` and
that ``base`` is on the target's history.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentc.integrator.compare import first_difference, parse_raw
from agentc.integrator.coordinator import Candidate
from agentc.integrator.message import (
    MERGE,
    ONE_COMMIT,
    PUT_ON_TARGET,
    Provenance,
    message,
    reviewed_diff,
)
from agentc.integrator.repo import Repo

MOVED_FOR_FAST_FORWARD = (
    "the target moved since the candidate's base; fast-forward lands only changes built on the "
    "current target"
)


@dataclass(frozen=True)
class Landing:
    """The commit to land (``revision``), or why nothing lands (``reason``, with the send-back
    reason code). ``empty``: the reviewed change is empty, ``revision`` is the target itself."""

    reviewed_diff: str
    revision: str | None = None
    reason: str = ""
    code: str = "conflict"
    empty: bool = False


def provenance(cand: Candidate, raw: bytes) -> Provenance:
    """What a landing of ``cand`` names, ``raw`` being its reviewed diff."""
    return Provenance(
        cand.task_id,
        cand.submission_id,
        cand.activity_id,
        cand.candidate_revision,
        cand.base_revision,
        reviewed_diff(raw),
    )


def build(repo: Repo, policy: str, cand: Candidate, tip: str) -> Landing:
    """The landing of ``cand``'s reviewed change on ``tip`` under ``policy``."""
    base, candidate, title = cand.base_revision, cand.candidate_revision, cand.title
    raw = repo.diff_raw(base, candidate)
    ids = provenance(cand, raw)
    digest = ids.reviewed_diff
    reviewed = parse_raw(raw)
    if not reviewed:  # the change is empty: nothing to commit, the target is the landing
        return Landing(digest, tip, empty=True)
    if policy == "fast-forward" and tip != base:
        return Landing(digest, reason=MOVED_FOR_FAST_FORWARD)
    reviewed_commit = repo.commit_tree(
        repo.tree_of(candidate), [base], message(title, ONE_COMMIT, ids)
    )
    if tip == base:
        tree = repo.tree_of(reviewed_commit)
    else:
        merged = repo.merge_trees(tip, reviewed_commit)
        if merged.tree is None:
            return Landing(digest, reason=f"conflict with the target: {merged.conflict}")
        tree = merged.tree
    landed = parse_raw(repo.diff_raw(tip, tree))
    if not landed:
        return Landing(digest, reason="the target already holds the reviewed change")
    difference = first_difference(reviewed, landed, repo.blob, repo.patch)
    if difference:
        why = "on the current target the landed change would differ from the reviewed one: "
        return Landing(digest, reason=why + difference)
    if tip == base:
        return Landing(digest, reviewed_commit)
    if policy == "merge":
        merge = repo.commit_tree(tree, [tip, reviewed_commit], message(title, MERGE, ids))
        return Landing(digest, merge)
    return Landing(digest, repo.commit_tree(tree, [tip], message(title, PUT_ON_TARGET, ids)))
