"""Is the landed change exactly the reviewed change? Pure functions over git's raw diffs.

The reviewed change is ``git diff-tree -r -z --no-renames <base> <candidate>``; the landed
change is the same command from the target the landing was built on to the landing's tree.
Both are parsed into one :class:`Change` per path (modes, object ids, status) and compared:

- the same set of paths;
- where the target did not touch a path since the base (the same old mode and id on both
  sides), the new mode and id must be identical;
- where both changed the same path, it must be a regular file on both sides, modified on both,
  with the same mode transition and the same text hunks: git's ``-U3`` diff of each blob pair
  (``Patch``) with the hunk headers (line numbers) left out, so the same lines are removed and
  added in the same surroundings (a different placement of the same lines is a difference). A
  binary or oversized blob, a symlink, a gitlink, an addition or a deletion changed on both
  sides is a difference.

:func:`first_difference` names the first differing path, or returns None. Git reads the trees
and computes the diffs (xdiff, fast on any input); everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agentc.core.errors import AgentcError

REGULAR = ("100644", "100755")
BINARY_PROBE = 8000  # git's own test: a NUL byte in the first 8000 bytes is binary
_MODE = re.compile(rb"[0-7]{6}")
_OID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")

Read = Callable[[str], bytes | None]
"""A blob's content by id, or None when it is too large to compare."""
Patch = Callable[[str, str], bytes]
"""Git's ``-U3`` diff of two blobs by id (``git diff -U3 <old> <new>``)."""


class RawDiffError(AgentcError, ValueError):
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
    reviewed: dict[bytes, Change], landed: dict[bytes, Change], read: Read, patch: Patch
) -> str | None:
    """Why the landed change is not the reviewed one (the first differing path), or None."""
    for path in sorted(reviewed.keys() | landed.keys()):
        why = _path_difference(reviewed.get(path), landed.get(path), read, patch)
        if why:
            return f"{shown(path)}: {why}"
    return None


def _path_difference(
    reviewed: Change | None, landed: Change | None, read: Read, patch: Patch
) -> str | None:
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
    return _text_difference(reviewed, landed, read, patch)


def _text_difference(reviewed: Change, landed: Change, read: Read, patch: Patch) -> str | None:
    ids = (reviewed.old_id, reviewed.new_id, landed.old_id, landed.new_id)
    blobs = [read(oid) for oid in ids]
    texts = [blob for blob in blobs if blob is not None]
    if len(texts) != len(blobs):
        return "changed by the target too, and too large to compare"
    if any(is_binary(text) for text in texts):
        return "changed by the target too, and binary"
    mine, theirs = patch(reviewed.old_id, reviewed.new_id), patch(landed.old_id, landed.new_id)
    if hunks(mine) != hunks(theirs):
        return "changed by the target too, and the landing's lines differ from the reviewed ones"
    return None


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_PROBE]


def hunks(patch: bytes) -> list[list[bytes]]:
    """The hunks of a unified diff: each the lines of its body (context, removed and added,
    with their prefixes, and git's "no newline" marks), without the header before the first
    hunk and without the hunk headers (line numbers, function context)."""
    found: list[list[bytes]] = []
    for line in patch.split(b"\n"):
        if line.startswith(b"@@"):
            found.append([])
        elif found and line:  # a body line is never empty: it starts with its prefix
            found[-1].append(line)
    return found
