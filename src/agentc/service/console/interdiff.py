"""What changed between a task's reviewed submission and the submission that amends it (the
change page's "Since the review", docs/console.md).

The coordinator has no repository, and needs none: both submissions' patches are recorded
(:mod:`agentc.service.work.artifacts`), each computed by the supervisor from its submission's
own revisions, so the difference between the reviewed change and the new one is the
difference between the two patches, file by file (as ``git range-diff`` shows a patch's new
version): a line of the reviewed patch that the new one no longer has, a line the new one
adds, the lines both have around them. Each patch is split into its files by the one reading
of a patch (:func:`agentc.service.console.diff.sections`, matched with git's exact file list)
and its lines compared with :mod:`difflib`. Line numbers are left out of the comparison (a
hunk that only moved is the same hunk); the ``index`` line stays in it, so a file whose
content changed differs even where its text shows nothing (a binary file, bytes that are not
UTF-8, which the recorded text holds as U+FFFD). A file is called unchanged only when that is
known: the same lines with the same full blob ids (the supervisor records ``--full-index``),
or the same lines of text that lost nothing in decoding; an abbreviated id (a patch recorded
before) could be forged by an agent grinding a prefix, so then the file is "cannot tell".

The patches are the agent's text: nothing here interprets a line, the page escapes every one,
and the work is bounded: a file whose two sides hold more than ``FILE_LINES`` lines, and every
file past ``PAGE_LINES`` compared lines on the page, is named with its counts, not compared.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from agentc.service.console.diff import sections

FILE_LINES = 4_000  # a file whose two patch sections hold more lines is not compared
PAGE_LINES = 20_000  # lines compared on one page, files in order
CONTEXT = 3
_NUMBERS = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_FULL_INDEX = re.compile(r"^index ([0-9a-f]{40}|[0-9a-f]{64})\.\.([0-9a-f]{40}|[0-9a-f]{64})\b")


@dataclass
class Row:
    """One line of the comparison: ``side`` is ``before`` (only in the reviewed patch),
    ``after`` (only in the new one), ``both`` or ``gap`` (lines both have, not shown)."""

    side: str
    text: str  # a line of a patch, its own +, - or space first

    @property
    def kind(self) -> str:
        """What the line is in its patch: ``add``, ``del``, ``ctx``, ``hunk`` or ``meta`` (a
        header of git's: ``index``, mode, rename)."""
        first = self.text[:1]
        return {"+": "add", "-": "del", " ": "ctx", "": "ctx", "@": "hunk"}.get(first, "meta")


@dataclass
class FileDelta:
    path: str
    old_path: str | None
    what: str  # changed | unchanged | added | dropped | too_large | unknown | unsure
    before: dict[str, Any] | None  # the file in the reviewed patch (status, added, removed)
    after: dict[str, Any] | None
    rows: list[Row] = field(default_factory=list)

    @property
    def shown(self) -> int:
        return sum(r.side != "gap" for r in self.rows)


@dataclass
class Interdiff:
    files: list[FileDelta]
    compared: bool  # False: a patch's text is missing or unreadable: the file list only
    why: str = ""  # why not compared

    @property
    def changed(self) -> int:
        return sum(f.what != "unchanged" for f in self.files)


def _key_lines(section: list[str]) -> list[str]:
    """A file section's lines as compared: no ``diff --git``, ``---`` or ``+++`` line (the
    path is known), hunk headers without their line numbers."""
    out: list[str] = []
    in_hunk = False
    for line in section[1:]:
        match = _NUMBERS.match(line)
        if match:
            in_hunk = True
            out.append("@@" + line[match.end() :])
        elif in_hunk or not line.startswith(("--- ", "+++ ")):
            out.append(line)
    return out


def known_same(lines: list[str], binary: bool) -> bool:
    """Whether equal compared lines prove an equal change: full blob ids on the ``index`` line
    (as recorded now), or, for text, lines that lost no byte in decoding. A file that only
    changed its mode has no ``index`` line and its mode lines say it all."""
    index = next((line for line in lines if line.startswith("index ")), None)
    if index is not None and _FULL_INDEX.match(index):
        return True
    if index is None and not any(line.startswith("@@") for line in lines):
        return not binary
    return not binary and not any("\ufffd" in line for line in lines)


Lines = dict[str, list[str]]


def _by_path(change: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], Lines | None]:
    """The patch's files by path and each file's compared lines (None: the text is missing,
    or its sections do not match its file list)."""
    files = {str(f["path"]): f for f in change["files"]}
    text = change.get("patch")
    found = None if text is None else sections(text)
    if found is None or len(found) != len(change["files"]):
        return files, None
    return files, {
        str(f["path"]): _key_lines(s) for f, s in zip(change["files"], found, strict=True)
    }


def _counts(f: dict[str, Any] | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {k: f.get(k) for k in ("status", "added", "removed", "old_path")}


def compare(reviewed: dict[str, Any], amended: dict[str, Any]) -> Interdiff:
    """The difference from the reviewed patch to the amended one (two recorded patches, as
    :func:`agentc.service.work.artifacts.patch_view` reads them)."""
    old_files, old_lines = _by_path(reviewed)
    new_files, new_lines = _by_path(amended)
    compared = old_lines is not None and new_lines is not None
    why = "" if compared else _why_not(reviewed, amended)
    order = list(new_files) + [p for p in old_files if p not in new_files]
    budget = PAGE_LINES
    out: list[FileDelta] = []
    for path in order:
        before, after = old_files.get(path), new_files.get(path)
        delta = FileDelta(
            path, (after or before or {}).get("old_path"), "", _counts(before), _counts(after)
        )
        out.append(delta)
        if old_lines is None or new_lines is None:
            delta.what = "unknown" if before and after else ("added" if after else "dropped")
            continue
        a, b = old_lines.get(path, []), new_lines.get(path, [])
        if before is not None and after is not None and a == b:
            binary = before.get("added") is None or after.get("added") is None
            delta.what = "unchanged" if known_same(a, binary) else "unsure"
            continue
        size = len(a) + len(b)
        if size > FILE_LINES or size > budget:
            delta.what = "too_large"
            continue
        budget -= size
        delta.what = "changed" if before and after else ("added" if after else "dropped")
        delta.rows = _rows(a, b)
    return Interdiff(out, compared, why)


def _why_not(reviewed: dict[str, Any], amended: dict[str, Any]) -> str:
    for name, change in (("reviewed", reviewed), ("new", amended)):
        if change.get("patch") is None:
            return f"the {name} patch's text was not recorded ({change.get('note') or 'withheld'})"
    return "a patch's sections do not match its file list"


def _rows(a: list[str], b: list[str]) -> list[Row]:
    """The two sides' lines in groups around each difference, ``CONTEXT`` lines both have on
    either side, a ``gap`` row between groups."""
    rows: list[Row] = []
    matcher = difflib.SequenceMatcher(None, a, b)
    for n, group in enumerate(matcher.get_grouped_opcodes(CONTEXT)):
        if n or group[0][1] > 0:
            rows.append(Row("gap", ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [Row("both", line) for line in a[i1:i2]]
                continue
            rows += [Row("before", line) for line in a[i1:i2]]
            rows += [Row("after", line) for line in b[j1:j2]]
    return rows
