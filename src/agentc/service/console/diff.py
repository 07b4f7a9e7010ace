"""A submission's patch as the console shows it (docs/console.md "The change", D45).

The patch text is git's own output (``git diff-tree -p -M``, computed by the supervisor from the
submission's two revisions), but the files' contents are the agent's: every line is escaped,
highlighted on the server by Pygments into classes that ``console.css`` colours (no inline
style, no script). The file names come from the artifact's file list (git's ``-z`` output,
exact), matched with the patch's sections in order; a section is read by its hunk headers'
counts, so no content line can pass for a header.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

COLLAPSED_LINES = 400  # a file with more lines of diff than this starts folded
# The page highlights the files' diffs in order up to this many characters in all; a file past
# it is shown escaped, uncoloured (Pygments lexes ~0.5 MB/s: this keeps a page under a second).
HIGHLIGHT_CHARS = 120_000
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


@dataclass
class Line:
    kind: str  # "ctx" | "add" | "del" | "note"
    old: int | None
    new: int | None
    text: str
    html: Markup = Markup("")
    notes: list[dict[str, Any]] = field(default_factory=list)  # findings shown under it


@dataclass
class Hunk:
    header: str
    lines: list[Line] = field(default_factory=list)


@dataclass
class FileDiff:
    path: str
    old_path: str | None
    status: str
    added: int | None
    removed: int | None
    binary: bool = False
    headers: list[str] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)
    noted: bool = False  # a finding is shown on one of its lines (then it starts open)
    plain: bool = False  # past the page's highlighting budget: shown uncoloured

    @property
    def size(self) -> int:
        return sum(len(h.lines) for h in self.hunks)

    @property
    def collapsed(self) -> bool:
        return self.size > COLLAPSED_LINES and not self.noted

    def number(self, line: Line) -> int | None:
        """A line's number as a finding names it: the new file's (a deleted file's old)."""
        return line.old if self.status == "deleted" else line.new


def anchor(index: int, line: Line) -> str:
    """The id of a line's row on the page (``index``: the file's, from 1)."""
    return f"f{index}-" + (f"n{line.new}" if line.new is not None else f"o{line.old}")


def place(files: list[FileDiff], notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Put each finding that names a shown line (``path``, ``line``, ``end_line``) under that
    line (a range's last, else its first), setting its ``anchor``; returns the rest."""
    where: dict[tuple[str, int], tuple[FileDiff, int, Line]] = {}
    for index, f in enumerate(files, start=1):
        for h in f.hunks:
            for line in h.lines:
                number = f.number(line)
                if number is not None and line.kind != "note":
                    where[(f.path, number)] = (f, index, line)
    rest = []
    for note in notes:
        spots = [
            where.get((note.get("path") or "", n or 0))
            for n in (note.get("end_line"), note.get("line"))
        ]
        spot = next((s for s in spots if s is not None), None)
        if spot is None:
            rest.append(note)
            continue
        f, index, line = spot
        line.notes.append(note)
        note["anchor"] = anchor(index, line)
        f.noted = True
    return rest


def sections(patch: str) -> list[list[str]]:
    """The patch's per-file sections (each starting with its ``diff --git`` line)."""
    lines = patch.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    found: list[list[str]] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("diff --git "):
            i += 1  # nothing git writes outside a section; skipped
            continue
        section = [lines[i]]
        i += 1
        while i < len(lines) and not lines[i].startswith("diff --git "):
            match = _HUNK.match(lines[i])
            section.append(lines[i])
            i += 1
            if match:
                take = _hunk_length(lines, i, match)
                section += lines[i : i + take]
                i += take
        found.append(section)
    return found


def _hunk_length(lines: list[str], start: int, match: re.Match[str]) -> int:
    """How many lines after a hunk header belong to it (its counts, and "\\" markers)."""
    old = int(match.group(2) or "1")
    new = int(match.group(4) or "1")
    i = start
    while i < len(lines) and (old > 0 or new > 0 or lines[i].startswith("\\")):
        first = lines[i][:1]
        if first in (" ", ""):
            old, new = old - 1, new - 1
        elif first == "-":
            old -= 1
        elif first == "+":
            new -= 1
        elif first != "\\":
            break
        i += 1
    return i - start


def parse(files: list[dict[str, Any]], patch: str | None) -> tuple[list[FileDiff], bool]:
    """The files with their hunks; False when the patch's sections do not match the list
    (then only the list is shown)."""
    diffs = [
        FileDiff(
            path=f["path"],
            old_path=f.get("old_path"),
            status=f["status"],
            added=f.get("added"),
            removed=f.get("removed"),
            binary=f.get("added") is None,
        )
        for f in files
    ]
    if patch is None:
        return diffs, True
    found = sections(patch)
    if len(found) != len(diffs):
        return diffs, False
    budget = HIGHLIGHT_CHARS
    for diff, section in zip(diffs, found, strict=True):
        _fill(diff, section)
        budget -= _highlight(diff, budget)
    return diffs, True


def _fill(diff: FileDiff, section: list[str]) -> None:
    hunk: Hunk | None = None
    old = new = 0
    for text in section[1:]:
        match = _HUNK.match(text) if hunk is None or text.startswith("@@") else None
        if match:
            old, new = int(match.group(1)), int(match.group(3))
            hunk = Hunk(text)
            diff.hunks.append(hunk)
        elif hunk is None:
            if not text.startswith(("--- ", "+++ ", "index ")):
                diff.headers.append(text)
        else:
            kind = {"+": "add", "-": "del", "\\": "note"}.get(text[:1], "ctx")
            line = Line(kind, old if kind in ("ctx", "del") else None, None, text[1:])
            if kind in ("ctx", "add"):
                line.new = new
            old += kind in ("ctx", "del")
            new += kind in ("ctx", "add")
            hunk.lines.append(line)


def _lexer(path: str) -> Lexer:
    try:
        lexer: Lexer = get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False, ensurenl=False)
    return lexer


def _highlight(diff: FileDiff, budget: int) -> int:
    """Each line's HTML: the file's lines lexed in one pass (so a token has its neighbours),
    split back at the newlines; every value escaped. Over the ``budget`` of characters the
    lines are only escaped (``plain``). Returns the characters highlighted."""
    lines = [line for h in diff.hunks for line in h.lines if line.kind != "note"]
    for h in diff.hunks:
        for line in h.lines:
            line.html = escape(line.text)
    joined = "\n".join(line.text for line in lines)
    if not lines:
        return 0
    if len(joined) > budget:
        diff.plain = True
        return 0
    out: list[list[str]] = [[]]
    for token, value in _lexer(diff.path).get_tokens(joined):
        css = _css(token)
        for i, part in enumerate(value.split("\n") if "\n" in value else (value,)):
            if i:
                out.append([])
            if part:  # the class is one of Pygments' own names; the text is escaped
                out[-1].append(
                    f'<span class="{css}">{escape(part)}</span>' if css else escape(part)
                )
    if len(out) == len(lines):
        for line, parts in zip(lines, out, strict=True):
            # Each part is escape()d text, alone or in a span of one of Pygments' own class
            # names (a constant table): joined as strings, ~2x faster than Markup.format.
            line.html = Markup("".join(parts))  # noqa: S704
    return len(joined)


@functools.cache
def _css(token: _TokenType) -> str:
    """The class of a token type: its own or its nearest ancestor's short name."""
    while token not in STANDARD_TYPES and token.parent is not None:
        token = token.parent
    return STANDARD_TYPES.get(token, "")


@dataclass
class Row:
    """One row of the side-by-side view: the old line (left) and the new (right)."""

    left: Line | None
    right: Line | None


def side_by_side(hunk: Hunk) -> list[Row]:
    """Pair a run of removed lines with the added lines after it; context on both sides."""
    rows: list[Row] = []
    dels: list[Line] = []
    adds: list[Line] = []

    def flush() -> None:
        for i in range(max(len(dels), len(adds))):
            rows.append(Row(dels[i] if i < len(dels) else None, adds[i] if i < len(adds) else None))
        dels.clear()
        adds.clear()

    for line in hunk.lines:
        if line.kind == "del" and not adds:
            dels.append(line)
        elif line.kind == "add":
            adds.append(line)
        elif line.kind == "del":
            flush()
            dels.append(line)
        else:
            flush()
            rows.append(Row(line, line) if line.kind == "ctx" else Row(line, None))
    flush()
    return rows
