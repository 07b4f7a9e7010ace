"""Is the landed change exactly the reviewed change? Pure functions over git's raw diffs.

The reviewed change is ``git diff-tree -r -z --no-renames <base> <candidate>``; the landed
change is the same command from the target the landing was built on to the landing's tree.
Both are parsed into one :class:`Change` per path (modes, object ids, status) and compared:

- the same set of paths;
- where the target did not touch a path since the base (the same old mode and id on both
  sides), the new mode and id must be identical;
- where both changed the same path, it must be a regular file on both sides, modified on both,
  with the same mode transition and the same text hunks: a ``-U3`` diff of each blob pair with
  the line numbers left out, so the same lines are removed and added in the same surroundings
  (a different placement of the same lines is a difference). A binary or oversized blob, a
  symlink, a gitlink, an addition or a deletion changed on both sides is a difference.

:func:`first_difference` names the first differing path, or returns None.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

REGULAR = ("100644", "100755")
BINARY_PROBE = 8000  # git's own test: a NUL byte in the first 8000 bytes is binary
CONTEXT = 3
_MODE = re.compile(rb"[0-7]{6}")
_OID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")

Hunk = tuple[tuple[str, bytes], ...]
Read = Callable[[str], bytes | None]
"""A blob's content by id, or None when it is too large to compare."""


class RawDiffError(ValueError):
    """Output that is not ``git diff-tree -r -z --no-renames`` raw records."""


@dataclass(frozen=True)
class Change:
    """One path's record in a raw diff: ``:<old mode> <new mode> <old id> <new id> <status>``."""

    old_mode: str
    new_mode: str
    old_id: str
    new_id: str
    status: str

    @property
    def old(self) -> tuple[str, str]:
        return self.old_mode, self.old_id

    @property
    def new(self) -> tuple[str, str]:
        return self.new_mode, self.new_id

    @property
    def mode_change(self) -> tuple[str, str] | None:
        return None if self.old_mode == self.new_mode else (self.old_mode, self.new_mode)


def parse_raw(data: bytes) -> dict[bytes, Change]:
    """The records of ``git diff-tree -r -z --no-renames`` output, by path (bytes, as git
    stores it)."""
    fields = data.split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    if len(fields) % 2:
        raise RawDiffError("a record without its path")
    changes: dict[bytes, Change] = {}
    for header, path in zip(fields[::2], fields[1::2], strict=True):
        changes[path] = _record(header, path, changes)
    return changes


def _record(header: bytes, path: bytes, seen: dict[bytes, Change]) -> Change:
    parts = header.split(b" ")
    if len(parts) != 5 or not parts[0].startswith(b":") or not path or path in seen:
        raise RawDiffError(f"not a raw diff record: {header[:120]!r}")
    old_mode, new_mode = parts[0][1:], parts[1]
    if not (_MODE.fullmatch(old_mode) and _MODE.fullmatch(new_mode)):
        raise RawDiffError(f"bad modes in {header[:120]!r}")
    if not (_OID.fullmatch(parts[2]) and _OID.fullmatch(parts[3])):
        raise RawDiffError(f"bad object ids in {header[:120]!r}")
    if parts[4] not in (b"A", b"D", b"M", b"T"):
        raise RawDiffError(f"unexpected status {parts[4][:8]!r}")
    return Change(*(p.decode() for p in (old_mode, new_mode, parts[2], parts[3], parts[4])))


def shown(path: bytes) -> str:
    """A path as a reason may show it: printable ASCII, anything else as ``?``."""
    return _UNPRINTABLE.sub("?", path.decode("utf-8", errors="replace"))[:300]


def first_difference(
    reviewed: dict[bytes, Change], landed: dict[bytes, Change], read: Read
) -> str | None:
    """Why the landed change is not the reviewed one (the first differing path), or None."""
    for path in sorted(reviewed.keys() | landed.keys()):
        why = _path_difference(reviewed.get(path), landed.get(path), read)
        if why:
            return f"{shown(path)}: {why}"
    return None


def _path_difference(reviewed: Change | None, landed: Change | None, read: Read) -> str | None:
    if reviewed is None:
        return "the landing changes it, the reviewed change does not"
    if landed is None:
        return "the reviewed change changes it, the landing does not"
    if reviewed.old == landed.old:  # the target did not touch it since the base
        return None if reviewed.new == landed.new else "the landing changes it differently"
    if reviewed.status != "M" or landed.status != "M":
        return "changed by the target too, and not a modification of a file on both sides"
    modes = (reviewed.old_mode, reviewed.new_mode, landed.old_mode, landed.new_mode)
    if not all(mode in REGULAR for mode in modes):
        return "changed by the target too, and not a regular file on both sides"
    if reviewed.mode_change != landed.mode_change:
        return "the landing changes its mode differently"
    return _text_difference(reviewed, landed, read)


def _text_difference(reviewed: Change, landed: Change, read: Read) -> str | None:
    ids = (reviewed.old_id, reviewed.new_id, landed.old_id, landed.new_id)
    blobs = [read(oid) for oid in ids]
    texts = [blob for blob in blobs if blob is not None]
    if len(texts) != len(blobs):
        return "changed by the target too, and too large to compare"
    if any(is_binary(text) for text in texts):
        return "changed by the target too, and binary"
    if hunks(texts[0], texts[1]) != hunks(texts[2], texts[3]):
        return "changed by the target too, and the landing's lines differ from the reviewed ones"
    return None


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_PROBE]


def lines(data: bytes) -> list[bytes]:
    """``data`` split after each newline, as git splits it (a last line may lack one)."""
    parts = data.split(b"\n")
    found = [p + b"\n" for p in parts[:-1]]
    return [*found, parts[-1]] if parts[-1] else found


def hunks(old: bytes, new: bytes) -> list[Hunk]:
    """The hunks of a unified diff of ``old`` to ``new`` with three lines of context, each the
    sequence of its context (`` ``), removed (``-``) and added (``+``) lines, without line
    numbers (none when they are equal)."""
    return [] if old == new else list(_hunks(lines(old), lines(new)))


def _hunks(a: list[bytes], b: list[bytes]) -> Iterator[Hunk]:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        body: list[tuple[str, bytes]] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                body += [(" ", line) for line in a[i1:i2]]
                continue
            body += [("-", line) for line in a[i1:i2]]
            body += [("+", line) for line in b[j1:j2]]
        yield tuple(body)
