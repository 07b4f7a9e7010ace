"""The pre-landing scan: what a change adds, and the candidate's commit messages, looked at for
secrets and for text planted for later agents before anything lands (docs/integrator.md, "The
pre-landing scan").

What is read: every line the reviewed diff adds (``git diff -U0`` of each changed text file; a
new binary file whole, for secrets only), every changed path's name, and every commit between
the base and the candidate (message, author and committer). What is looked for:

- secrets: the common formats and the verifiers of token-shaped strings
  (:func:`agentc.core.secrets.scan`, every encoding it decodes), the verifiers then asked of
  the coordinator (``GET …/known-secrets``): its own credentials and sessions;
- hidden characters and lines addressed to AI agents (:mod:`agentc.core.planted`).

A finding names where (a path and line, a commit) and what, never the secret or the planted
text. Content past :data:`SCAN_MAX` bytes is itself a finding: what cannot be read whole is not
passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from agentc.core.planted import addressed_to_agents, hidden_characters
from agentc.core.secrets import ScanLimit, described, scan
from agentc.integrator.compare import Change, is_binary, parse_raw, shown
from agentc.integrator.repo import Repo

SCAN_MAX = 64 * 1024 * 1024  # bytes of added content and messages read per candidate
WINDOW = 8 * 1024 * 1024  # a large text is scanned for secrets in windows of this size
OVERLAP = 64 * 1024  # overlapping by this much (an encoded secret is far shorter)
MAX_COMMITS = 10_000
FINDINGS_MAX = 50
_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
UNSCANNABLE = "content whose nested encodings decode to more than the scan reads"


@dataclass(frozen=True)
class Finding:
    where: str
    what: str

    def line(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class Scanned:
    """The findings, and the verifiers of token-shaped strings (to ask the coordinator), each
    with where it was seen and how it was encoded."""

    findings: list[Finding] = field(default_factory=list)
    tokens: dict[str, tuple[str, str]] = field(default_factory=dict)
    read: int = 0

    def add(self, where: str, what: str) -> None:
        if len(self.findings) < FINDINGS_MAX:
            self.findings.append(Finding(where, what))

    def secrets(self, where: str, data: bytes) -> None:
        """The secret formats and token-shaped strings of ``data``, in windows."""
        step = WINDOW - OVERLAP
        for start in range(0, max(1, len(data) - OVERLAP), step):
            try:
                found = scan(data[start : start + WINDOW])
            except ScanLimit:
                self.add(where, UNSCANNABLE)
                return
            if found.format is not None:
                self.add(where, described(found.format.kind, found.format.encoding))
                return
            for verifier, encoding in found.tokens.items():
                self.tokens.setdefault(verifier, (where, encoding))

    def text(self, where: str, lines: Iterable[tuple[int, str]], *, new_file: bool) -> None:
        """Hidden characters and lines addressed to agents, line by line (``where:<n>``)."""
        for number, line in lines:
            for _index, what in hidden_characters(line, file_start=new_file and number == 1):
                self.add(f"{where}:{number}" if number else where, what)
                break  # one finding per line is enough to name it
            rule = addressed_to_agents(line)
            if rule:
                self.add(f"{where}:{number}" if number else where, f"{rule} (for later agents)")

    def budget(self, size: int) -> bool:
        """Count ``size`` more bytes read; False once past :data:`SCAN_MAX`."""
        self.read += size
        if self.read > SCAN_MAX:
            self.add("the change", f"adds more than {SCAN_MAX >> 20} MiB: too large to scan")
            return False
        return True


def added_lines(patch: bytes) -> Iterator[tuple[int, bytes]]:
    """``(line number in the new file, line)`` of each line a ``-U0`` diff adds."""
    number = 0
    for line in patch.split(b"\n"):
        hunk = _HUNK.match(line)
        if hunk:
            number = int(hunk[1])
        elif line.startswith(b"+") and number:
            yield number, line[1:]
            number += 1


def _decoded(lines: Iterable[tuple[int, bytes]]) -> list[tuple[int, str]]:
    return [(n, line.decode("utf-8", errors="replace")) for n, line in lines]


def scan_change(repo: Repo, base: str, candidate: str) -> Scanned:
    """Scan what the change from ``base`` to ``candidate`` adds, and the candidate's commits."""
    out = Scanned()
    for path, change in parse_raw(repo.diff_raw(base, candidate)).items():
        where = shown(path)
        name = path.decode("utf-8", errors="replace")
        out.secrets(f"the name of {where}", path)
        out.text(f"the name of {where}", [(0, name)], new_file=False)
        if change.status == "D" or change.new_mode == "160000":  # nothing added; a gitlink
            continue
        if not _scan_blob(repo, out, where, change):
            return out
    _scan_commits(repo, out, base, candidate)
    return out


def _scan_blob(repo: Repo, out: Scanned, where: str, change: Change) -> bool:
    """One changed file's added content; False once the budget is spent."""
    size = repo.size(change.new_id)
    if not out.budget(size):
        return False
    data = repo.blob_bytes(change.new_id)
    added = change.status == "A"
    if is_binary(data):
        out.secrets(where, data)  # binary: secrets only, the whole new content
        return True
    if added:
        lines = list(enumerate(data.split(b"\n"), start=1))
    else:
        lines = list(added_lines(repo.unified0(change.old_id, change.new_id)))
    out.secrets(where, b"\n".join(line for _n, line in lines))
    out.text(where, _decoded(lines), new_file=added)
    return True


def _scan_commits(repo: Repo, out: Scanned, base: str, candidate: str) -> None:
    commits = repo.commit_texts(base, candidate, MAX_COMMITS + 1)
    if len(commits) > MAX_COMMITS:
        out.add("the candidate", f"has more than {MAX_COMMITS} commits: too many to scan")
        return
    for sha, text in commits:
        if not out.budget(len(text)):
            return
        where = f"commit {sha}"
        out.secrets(where, text)
        decoded = text.decode("utf-8", errors="replace").split("\n")
        out.text(where, list(enumerate(decoded, start=1)), new_file=False)


Lookup = Callable[[list[str]], dict[str, str]]
"""The coordinator's answer: which verifiers are its live secrets (verifier -> kind)."""


def known_findings(out: Scanned, lookup: Lookup, batch: int = 64) -> None:
    """Ask the coordinator about the token-shaped strings found; each of its own secrets is a
    finding."""
    verifiers = list(out.tokens)
    for start in range(0, len(verifiers), batch):
        for verifier, kind in lookup(verifiers[start : start + batch]).items():
            where, encoding = out.tokens[verifier]
            out.add(where, described(kind, encoding))
