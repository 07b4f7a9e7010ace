"""The patch the loop computes for the console, from a real repository: the digest is the
integrator's reviewed diff, renames and binary files are named, and the text is withheld over
the cap (the file list stays)."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from agentc.supervisor.loop.patch import of_revisions
from tests.kit.changes import LARGE_LINES, make_change


def test_the_patch_of_two_revisions(tmp_path: Path) -> None:
    change = make_change(tmp_path / "repo")
    body = of_revisions(change.repo, change.base, change.candidate, 1 << 20)
    raw = subprocess.run(
        ["git", "-C", str(change.repo), "diff-tree", "-r", "-z", "--no-renames"]
        + [change.base, change.candidate],
        capture_output=True,
        check=True,
    ).stdout
    assert body["reviewed_diff"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    files = {f["path"]: f for f in body["files"]}
    assert files["new_name.txt"]["status"] == "renamed"
    assert files["new_name.txt"]["old_path"] == "old_name.txt"
    assert files["logo.png"] == {
        "path": "logo.png",
        "old_path": None,
        "status": "added",
        "added": None,
        "removed": None,
    }
    assert files["gone.txt"]["status"] == "deleted"
    assert (files["large.txt"]["added"], files["large.txt"]["removed"]) == (
        LARGE_LINES,
        LARGE_LINES,
    )
    assert files["app.py"]["status"] == "modified"
    assert body["patch"] is not None and body["patch_bytes"] == len(body["patch"].encode())
    assert body["patch"].count("diff --git ") == len(body["files"]) == 6
    # full blob ids: the console tells two versions of a file apart by them (interdiff)
    index = re.findall(r"^index (\S+)\.\.(\S+)", body["patch"], re.M)
    assert len(index) == 5 and all(len(a) == len(b) == 40 for a, b in index)  # not the rename
    assert body["note"] == ""


def test_over_the_cap_the_text_is_withheld(tmp_path: Path) -> None:
    change = make_change(tmp_path / "repo")
    body = of_revisions(change.repo, change.base, change.candidate, 1000)
    assert body["patch"] is None
    assert body["patch_bytes"] > 1000
    assert "over the cap of 1000" in body["note"]
    assert len(body["files"]) == 6
