"""Find known tokens (by SHA-256 digest) and private keys in bytes, streamed in windows.

Token shape: the helper only knows digests, so it hashes every token-shaped substring and looks
the digest up. A *run* is a maximal run of ``A-Z a-z 0-9 _ . ~ + / = -``; the candidates of a run
are the run itself, the run without trailing dots, the part after its first ``=``, each part
between ``=``, ``.``, ``/``, ``+`` or ``~`` separators of one kind, and each part between any of
them (``:``, ``@``, quotes, spaces and other characters already end a run). Candidates of 16
to 4,096 characters are hashed; runs longer than that are not tokens. A private key is a PEM
armour line, ``-----BEGIN <words> PRIVATE KEY-----``.

Content is read in windows of :data:`WINDOW` bytes that overlap by :data:`OVERLAP`, so a run or an
armour line crossing a window edge is seen whole in the next window.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator

MIN_TOKEN = 16
MAX_TOKEN = 4096
WINDOW = 8 * 1024 * 1024
OVERLAP = MAX_TOKEN + 128
KNOWN_TOKEN = "a known token"  # noqa: S105 (a finding, not a secret)
PRIVATE_KEY = "a private key"
_RUN = re.compile(rb"[A-Za-z0-9_.~+/=-]{%d,}" % MIN_TOKEN)
_KEY = re.compile(rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_SEPARATORS = (b"=", b".", b"/", b"+", b"~")
_ANY_SEPARATOR = re.compile(rb"[=./+~]")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def is_digest(value: str) -> bool:
    return bool(_DIGEST.fullmatch(value))


def _candidates(run: bytes) -> Iterator[bytes]:
    yield run
    yield run.rstrip(b".")
    if b"=" in run:
        yield run.split(b"=", 1)[1]
    for sep in _SEPARATORS:
        if sep in run:
            yield from run.split(sep)
    yield from _ANY_SEPARATOR.split(run)


class Scanner:
    """Looks for the tokens whose SHA-256 hex digests it is given, and for private keys."""

    def __init__(self, digests: Iterable[str]) -> None:
        self.digests = frozenset(digests)
        bad = [d for d in self.digests if not is_digest(d)]
        if bad:
            raise ValueError("a known digest must be 64 lowercase hex digits")

    def scan(self, data: bytes) -> str | None:
        """What secret ``data`` carries (:data:`KNOWN_TOKEN`, :data:`PRIVATE_KEY`) or None."""
        if _KEY.search(data):
            return PRIVATE_KEY
        if not self.digests:
            return None
        for match in _RUN.finditer(data):
            run = match.group()
            if len(run) > MAX_TOKEN:
                continue
            for candidate in set(_candidates(run)):
                if MIN_TOKEN <= len(candidate) <= MAX_TOKEN and (
                    hashlib.sha256(candidate).hexdigest() in self.digests
                ):
                    return KNOWN_TOKEN
        return None

    def scan_stream(self, chunks: Iterable[bytes]) -> str | None:
        """:meth:`scan` over content that arrives in chunks, in overlapping windows."""
        window = b""
        fresh = 0
        for chunk in chunks:
            window += chunk
            fresh += len(chunk)
            if len(window) >= WINDOW:
                found = self.scan(window)
                if found:
                    return found
                window = window[-OVERLAP:]
                fresh = 0
        return self.scan(window) if fresh else None
