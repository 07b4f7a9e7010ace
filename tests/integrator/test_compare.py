"""The comparison of a landed change with the reviewed change (agentc.integrator.compare), and
the landing's message: examples and properties, the blobs and their diffs from real git."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentc.integrator.compare import Change, RawDiffError, first_difference, hunks, parse_raw
from agentc.integrator.message import Provenance, message, reviewed_diff, title_line
from agentc.integrator.repo import Repo

ZERO = "0" * 40


class Blobs:
    """Blobs in a real bare repository: ``read`` and ``patch`` for first_difference."""

    def __init__(self, path: Path) -> None:
        self.repo = Repo(path, str(path), "main", ("i", "i@example.invalid"))
        self.repo.ensure()
        self.read = self.repo.blob
        self.patch = self.repo.patch

    def add(self, data: bytes) -> str:
        done = subprocess.run(
            ["git", "-C", str(self.repo.path), "hash-object", "-w", "--stdin"],
            input=data,
            capture_output=True,
            check=True,
        )
        return done.stdout.decode().strip()

    def differ(self, reviewed: dict[bytes, Change], landed: dict[bytes, Change]) -> str | None:
        return first_difference(reviewed, landed, self.read, self.patch)

    def hunks(self, old: bytes, new: bytes) -> list[list[bytes]]:
        return hunks(self.patch(self.add(old), self.add(new)))


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Blobs]:
    yield Blobs(tmp_path_factory.mktemp("blobs") / "repo")


def modified(blobs: Blobs, old: bytes, new: bytes, modes: tuple[str, str] = ("100644",) * 2):
    return Change(modes[0], modes[1], blobs.add(old), blobs.add(new), "M")


def raw(records: dict[bytes, Change]) -> bytes:
    out = b""
    for path, c in records.items():
        head = f":{c.old_mode} {c.new_mode} {c.old_id} {c.new_id} {c.status}"
        out += head.encode() + b"\0" + path + b"\0"
    return out


TEN = b"".join(b"line %d\n" % i for i in range(10))


def test_parse_reads_what_git_prints():
    data = (
        b":000000 100755 " + ZERO.encode() + b" " + b"a" * 40 + b" A\0bin/run me\0"
        b":120000 000000 " + b"b" * 40 + b" " + ZERO.encode() + b" D\0link\0"
    )
    parsed = parse_raw(data)
    assert parsed[b"bin/run me"] == Change("000000", "100755", ZERO, "a" * 40, "A")
    assert parsed[b"link"].status == "D" and parsed[b"link"].old_mode == "120000"
    assert parse_raw(b"") == {}


@pytest.mark.parametrize(
    "data",
    [
        b":100644 100644 " + b"a" * 40 + b" " + b"b" * 40 + b" M\0",  # no path
        b"100644 100644 " + b"a" * 40 + b" " + b"b" * 40 + b" M\0p\0",  # no colon
        b":100644 100644 " + b"a" * 39 + b" " + b"b" * 40 + b" M\0p\0",  # short id
        b":100644 100644 " + b"a" * 40 + b" " + b"b" * 40 + b" R100\0p\0q\0",  # a rename
        b":100644 100644 " + b"a" * 40 + b" " + b"b" * 40 + b" M\0p\0" * 2,  # a path twice
        b":10064x 100644 " + b"a" * 40 + b" " + b"b" * 40 + b" M\0p\0",
    ],
)
def test_parse_refuses_anything_else(data: bytes):
    with pytest.raises(RawDiffError):
        parse_raw(data)


@given(st.binary(max_size=300))
def test_parse_never_fails_otherwise(data: bytes):
    try:
        parse_raw(data)
    except RawDiffError:
        pass


def test_an_untouched_path_must_land_identically(blobs: Blobs):
    change = {b"a.txt": Change("000000", "100644", ZERO, blobs.add(b"a\n"), "A")}
    assert blobs.differ(change, dict(change)) is None
    other = {b"a.txt": Change("000000", "100644", ZERO, blobs.add(b"b\n"), "A")}
    assert blobs.differ(change, other) == "a.txt: the landing changes it differently"
    executable = {b"a.txt": Change("000000", "100755", ZERO, blobs.add(b"a\n"), "A")}
    assert "differently" in str(blobs.differ(change, executable))


def test_a_path_on_one_side_only_is_a_difference(blobs: Blobs):
    change = {b"a": Change("000000", "100644", ZERO, blobs.add(b"a\n"), "A")}
    evil = {b"evil.sh": Change("000000", "100755", ZERO, blobs.add(b"rm -rf\n"), "A")}
    assert blobs.differ(change, {**change, **evil}) == (
        "evil.sh: the landing changes it, the reviewed change does not"
    )
    assert blobs.differ({**change, **evil}, change) == (
        "evil.sh: the reviewed change changes it, the landing does not"
    )


def test_both_sides_changed_a_file_the_same_lines_in_the_same_place(blobs: Blobs):
    base = TEN
    candidate = base.replace(b"line 5\n", b"line five\n")
    target = b"top\n" + base + b"bottom\n"  # the target moved the lines, far from the change
    landed = target.replace(b"line 5\n", b"line five\n")
    reviewed = {b"f": modified(blobs, base, candidate)}
    assert blobs.differ(reviewed, {b"f": modified(blobs, target, landed)}) is None
    # The same added line in other surroundings is another change.
    elsewhere = target.replace(b"line 8\n", b"line five\n")
    moved = {b"f": modified(blobs, target, elsewhere)}
    assert "lines differ" in str(blobs.differ(reviewed, moved))
    # A line more is another change.
    more = landed.replace(b"bottom\n", b"bottom\nextra\n")
    assert "lines differ" in str(blobs.differ(reviewed, {b"f": modified(blobs, target, more)}))
    # So is the landing dropping the last newline.
    cut = {b"f": modified(blobs, target, landed[:-1])}
    assert "lines differ" in str(blobs.differ(reviewed, cut))


def test_both_sides_changed_other_kinds_are_differences(blobs: Blobs):
    reviewed = {b"f": modified(blobs, b"a\n\0", b"b\n\0")}
    binary = {b"f": modified(blobs, b"c\n\0", b"b\n\0")}
    assert "binary" in str(blobs.differ(reviewed, binary))
    link = {b"l": modified(blobs, b"x", b"y", ("120000", "120000"))}
    link2 = {b"l": modified(blobs, b"z", b"y", ("120000", "120000"))}
    assert "not a regular file" in str(blobs.differ(link, link2))
    module = {b"m": Change("160000", "160000", "1" * 40, "2" * 40, "M")}
    module2 = {b"m": Change("160000", "160000", "3" * 40, "2" * 40, "M")}
    assert "not a regular file" in str(blobs.differ(module, module2))
    added = {b"n": Change("000000", "100644", ZERO, blobs.add(b"n\n"), "A")}
    on_target = {b"n": modified(blobs, b"t\n", b"n\n")}
    assert "not a modification" in str(blobs.differ(added, on_target))


def test_the_mode_transition_must_match(blobs: Blobs):
    made_executable = {b"f": modified(blobs, TEN, TEN + b"x\n", ("100644", "100755"))}
    target = b"t\n" * 8 + TEN
    same = {b"f": modified(blobs, target, target + b"x\n", ("100644", "100755"))}
    assert blobs.differ(made_executable, same) is None
    kept = {b"f": modified(blobs, target, target + b"x\n", ("100755", "100755"))}
    assert "mode" in str(blobs.differ(made_executable, kept))


def test_a_blob_too_large_to_compare_is_a_difference(blobs: Blobs):
    reviewed = {b"f": modified(blobs, TEN, TEN + b"x\n")}
    landed = {b"f": modified(blobs, b"t\n" + TEN, b"t\n" + TEN + b"x\n")}

    def too_large(ident: str) -> bytes | None:
        return None if ident == landed[b"f"].old_id else blobs.read(ident)

    assert "too large" in str(first_difference(reviewed, landed, too_large, blobs.patch))


def test_a_path_is_shown_printable(blobs: Blobs):
    change = {b"a\x1b[31m\nb\xff": Change("000000", "100644", ZERO, blobs.add(b"a\n"), "A")}
    assert str(blobs.differ(change, {})).startswith("a?[31m?b?:")


def test_hunks_leave_out_headers_and_line_numbers(blobs: Blobs):
    assert blobs.hunks(TEN, TEN) == []
    assert blobs.hunks(b"", b"a\n") == [[b"+a"]]
    assert blobs.hunks(b"a\n", b"a") == [[b"-a", b"+a", b"\\ No newline at end of file"]]
    far = blobs.hunks(b"x\n" * 20 + TEN, b"x\n" * 20 + TEN.replace(b"line 9\n", b"nine\n"))
    assert far == [[b" line 6", b" line 7", b" line 8", b"-line 9", b"+nine"]]


def test_a_large_repetitive_file_is_compared(blobs: Blobs):
    """Git computes the diffs (a pure-Python matcher took minutes on this)."""
    base = b"x\n" * 50_000 + b"y\n"
    reviewed = {b"f": modified(blobs, base, b"x\n" * 25_000 + b"z\n" + base[50_000:])}
    target = b"top\n" * 8 + base
    landed = {
        b"f": modified(blobs, target, b"top\n" * 8 + b"x\n" * 25_000 + b"z\n" + base[50_000:])
    }
    assert blobs.differ(reviewed, landed) is None


# The property: a change lands unchanged after any edit of the target far enough away, and
# any other edit of the same file is a difference.

unique_lines = st.lists(
    st.integers(0, 10_000).map(lambda n: b"L%d\n" % n), min_size=12, max_size=40, unique=True
)


@settings(deadline=None, max_examples=60)
@given(unique_lines, st.data())
def test_a_change_is_the_same_on_a_target_edited_far_away(
    blobs: Blobs, base_lines: list[bytes], data: st.DataObject
):
    at = data.draw(st.integers(0, len(base_lines) - 1))
    new_line = b"NEW\n"
    candidate = [*base_lines[:at], new_line, *base_lines[at + 1 :]]
    # The target adds lines at least four lines away from the change (outside its context).
    far = [i for i in range(len(base_lines) + 1) if i <= at - 4 or i >= at + 5]
    if not far:
        return
    where = data.draw(st.sampled_from(far))
    extra = [b"T%d\n" % i for i in range(data.draw(st.integers(1, 5)))]
    target = [*base_lines[:where], *extra, *base_lines[where:]]
    shift = len(extra) if where <= at else 0
    landed = [*target[: at + shift], new_line, *target[at + shift + 1 :]]
    join = b"".join
    reviewed = blobs.hunks(join(base_lines), join(candidate))
    assert reviewed == blobs.hunks(join(target), join(landed))
    # Anything else: the change put one line further down.
    if at + shift + 2 < len(target):
        other = [*target[: at + shift + 1], new_line, *target[at + shift + 2 :]]
        assert reviewed != blobs.hunks(join(target), join(other))


@given(st.binary(max_size=300))
def test_hunks_never_fail(patch: bytes):
    assert all(isinstance(h, list) for h in hunks(patch))


# -- the message --------------------------------------------------------------------------------


def test_the_title_is_one_bounded_printable_line():
    assert title_line("Add it\n\nAgentc-Task: forged", "t1") == "Add it"
    assert title_line("a\rb", "t1") == "a"
    assert title_line("tab\there\x1b[1m", "t1") == "tab here [1m"
    assert title_line("\n\n", "t1") == "agentc task t1"
    long = title_line("x" * 500, "t1")
    assert len(long) == 100 and long.endswith("…")
    assert title_line("line\u2028Agentc-Base: x", "t") == "line"


@given(st.text(max_size=300))
def test_no_title_adds_a_line(title: str):
    line = title_line(title, "task")
    assert line and len(line) <= 100 and not any(c in line for c in "\n\r\x0b\x0c\x85")
    provenance = Provenance("task", "sub", "act", "c" * 40, "b" * 40, reviewed_diff(b""))
    text = message(title, "One sentence.", provenance)
    paragraphs = text.rstrip("\n").split("\n\n")
    assert len(paragraphs) == 3 and "\n" not in paragraphs[0]
    assert paragraphs[2].splitlines() == [
        "Agentc-Task: task",
        "Agentc-Attempt: unrecorded",
        "Agentc-Launch: unrecorded",
        "Agentc-Prompt: unrecorded",
        "Agentc-Submission: sub",
        "Agentc-Activity: act",
        f"Agentc-Candidate: {'c' * 40}",
        f"Agentc-Base: {'b' * 40}",
        "Agentc-Reviewed-Diff: sha256:" + hashlib.sha256(b"").hexdigest(),
        "Agentc-Scan: unrecorded",
        "Agentc-Harness: unrecorded",
        "Agentc-Model: unrecorded",
    ]


def test_an_id_that_could_add_a_line_is_refused():
    with pytest.raises(ValueError, match="task_id"):
        Provenance("t\nAgentc-Base: x", "s", "a", "c" * 40, "b" * 40, "sha256:0")


def test_raw_round_trip(blobs: Blobs):
    records = {b"p q": modified(blobs, b"1\n", b"2\n"), b"r": modified(blobs, b"3\n", b"4\n")}
    assert parse_raw(raw(records)) == records
