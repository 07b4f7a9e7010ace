"""The patch of a code submission, computed from the mirror for the console (decision D45).

After the agent submitted, the loop fetches the candidate ref into the mirror (it must hold the
submitted revision) and computes, from the submission's own base and candidate revisions:

- the reviewed diff's digest, ``sha256:`` of ``git diff-tree -r -z --no-renames base
  candidate`` (what the integrator's ``Agentc-Reviewed-Diff`` trailer names);
- the file list (``--numstat`` and ``--name-status``, renames found), always;
- the patch text (``git diff-tree -p -M --full-index``, no external diff driver, no text
  conversion), when within ``max_bytes``; beyond it the text is withheld and the note says
  so. Its ``index`` lines carry the full blob ids, so the console can tell two versions of a
  file apart by content even where the text shown is the same (a binary file, bytes that are
  not UTF-8).

Git writes the patch to a file (``--output``), so a huge change costs disk, never memory.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from agentc.supervisor.loop.repo import delete_review_branch, fetch_candidate, git, git_bytes

STATUS = {"A": "added", "D": "deleted", "M": "modified", "R": "renamed", "C": "copied"}
DIFF = ("--no-color", "--no-ext-diff", "--no-textconv", "-M")


def compute(
    mirror: Path, ref: str, launch_id: str, base: str, candidate: str, max_bytes: int
) -> dict[str, Any]:
    """The patch artifact's body (without the submission id) of ``base..candidate``."""
    fetch_candidate(mirror, ref, launch_id, candidate)
    try:
        return of_revisions(mirror, base, candidate, max_bytes)
    finally:
        delete_review_branch(mirror, launch_id)


def of_revisions(repo: Path, base: str, candidate: str, max_bytes: int) -> dict[str, Any]:
    """The patch artifact of two revisions present in ``repo``."""
    where = ("-C", str(repo))
    raw = git_bytes(*where, "diff-tree", "-r", "-z", "--no-renames", base, candidate)
    numstat = git_bytes(*where, "diff-tree", "-r", "-z", "--numstat", *DIFF, base, candidate)
    names = git_bytes(*where, "diff-tree", "-r", "-z", "--name-status", *DIFF, base, candidate)
    with tempfile.TemporaryDirectory(prefix="agentc-patch-") as scratch:
        out = Path(scratch) / "patch"
        patch = ("-p", "--full-index", f"--output={out}")
        git(*where, "diff-tree", "-r", *patch, *DIFF, base, candidate)
        size = out.stat().st_size
        text = None
        if size <= max_bytes:
            text = out.read_bytes().decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    note = "" if text is not None else f"the patch is {size} bytes, over the cap of {max_bytes}"
    return {
        "base_revision": base,
        "candidate_revision": candidate,
        "reviewed_diff": "sha256:" + hashlib.sha256(raw).hexdigest(),
        "files": files(numstat, names),
        "patch": text,
        "patch_bytes": size,
        "note": note,
    }


def files(numstat: bytes, names: bytes) -> list[dict[str, Any]]:
    """The changed paths from ``--numstat -z`` and ``--name-status -z`` (same order)."""
    counts = list(_numstat(numstat))
    found: list[dict[str, Any]] = []
    for index, (letter, old, new) in enumerate(_name_status(names)):
        added, removed = counts[index] if index < len(counts) else (None, None)
        if letter == "T":
            # The patch shows a type change (a file becoming a link) as two sections, the
            # deletion then the creation: so does the list, one entry per section.
            found.append(_entry(new, None, "deleted", 0 if removed is not None else None, removed))
            found.append(_entry(new, None, "added", added, 0 if added is not None else None))
            continue
        status = STATUS.get(letter, "modified")
        found.append(_entry(new, old if letter in "RC" else None, status, added, removed))
    return found


def _entry(
    path: str, old: str | None, status: str, added: int | None, removed: int | None
) -> dict[str, Any]:
    return {"path": path, "old_path": old, "status": status, "added": added, "removed": removed}


def _decode(name: bytes) -> str:
    return name.decode("utf-8", errors="replace")


def _numstat(out: bytes) -> list[tuple[int | None, int | None]]:
    fields = out.split(b"\0")
    counts: list[tuple[int | None, int | None]] = []
    i = 0
    while i < len(fields) and fields[i]:
        added, removed, path = fields[i].split(b"\t", 2)
        binary = added == b"-"
        counts.append((None, None) if binary else (int(added), int(removed)))
        i += 3 if path == b"" else 1  # a rename: "a\tr\t\0old\0new"
    return counts


def _name_status(out: bytes) -> list[tuple[str, str, str]]:
    fields = out.split(b"\0")
    entries: list[tuple[str, str, str]] = []
    i = 0
    while i < len(fields) and fields[i]:
        letter = fields[i][:1].decode()
        if letter in ("R", "C"):
            entries.append((letter, _decode(fields[i + 1]), _decode(fields[i + 2])))
            i += 3
        else:
            entries.append((letter, _decode(fields[i + 1]), _decode(fields[i + 1])))
            i += 2
    return entries
