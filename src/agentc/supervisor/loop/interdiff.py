"""What changed since the approved candidate: the interdiff a reviewer of a redone change reads.

A submission that reviewers approved and the integrator then sent back (a conflict with the
moved target, a failed check) comes back as a new candidate. Its reviewer is shown the whole
change as always, and also what differs from the approved one (docs/supervisor.md,
"Reviewing a redone change"):

- on the same base (a fix round starts from the red candidate): ``git diff <approved> <new>``;
- on another base (a conflict redone on the moved target): the approved change put on the new
  base first (``git merge-tree --write-tree <new base> <approved>``: the approved candidate
  descends from its base, an ancestor of the new one, so that base is the merge base; conflict
  markers and all where it no longer applies), then the diff from that tree to the new
  candidate: what the implementer did differently, its resolution of the conflict included.

Read from the task's workflow view (pure) and computed with git in the loop's mirror, bounded;
the text is the agents' and is quoted as data.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentc.client.reads import Submission, Workflow
from agentc.supervisor.loop.repo import fetch_candidate, git_bytes, merged_tree

MAX_BYTES = 64 * 1024
SENT_BACK = ("conflict", "check_failed")


def approved_before(view: Workflow, current: str) -> Submission | None:
    """The newest earlier submission of the task that was approved and then sent back by the
    integrator, with a candidate (None: the current one is the first to be reviewed)."""
    approved = {r["submission_id"] for r in view["reviews"] if r["decision"] == "approved"}
    sent = {
        a["submission_id"]
        for a in view["activities"]
        if (a.get("sent_back") or {}).get("reason_code") in SENT_BACK
    }
    for sub in view["submissions"]:  # newest first
        redone = sub["id"] in approved and sub["id"] in sent
        if sub["id"] != current and redone and sub["candidate_ref"]:
            return sub
    return None


def compute(
    mirror: Path, name: str, approved: Mapping[str, Any], new: Mapping[str, Any]
) -> dict[str, Any]:
    """The interdiff of ``new`` (the submission under review, its candidate in the mirror)
    against ``approved`` (fetched into the mirror as ``name``): ``{approved_candidate,
    approved_base, same_base, diff, truncated}``."""
    old_rev, old_base = str(approved["candidate_revision"]), str(approved["base_revision"])
    new_rev, new_base = str(new["candidate_revision"]), str(new["base_revision"])
    fetch_candidate(mirror, str(approved["candidate_ref"]), name, old_rev)
    same = old_base == new_base
    start = old_rev if same else merged_tree(mirror, new_base, old_rev)
    raw = git_bytes(
        "-C", str(mirror), "diff", "--no-color", "--no-ext-diff", "--no-textconv", start, new_rev
    )
    text = raw[:MAX_BYTES].decode("utf-8", errors="replace")
    return {
        "approved_candidate": old_rev,
        "approved_base": old_base,
        "same_base": same,
        "diff": text,
        "truncated": len(raw) > MAX_BYTES,
    }
