"""Find known tokens (by SHA-256 digest) and the common secret formats in bytes, streamed in
windows, with the one scanner of :mod:`agentc.core.secrets`.

The helper knows the launch's coordinator tokens only by their digests (``--known-digest``):
the scanner yields the verifier of every token-shaped string in every decoding of the content
(plain, reversed, base64, hex, nested), and a finding is a digest the helper knows, or a
format (a private key block, a cloud or forge key...). Content is read in windows of
:data:`WINDOW` bytes that overlap by :data:`OVERLAP`, so an encoding crossing a window edge is
seen whole in the next window; each window's scan is bounded (its decodings may total at most
a fixed multiple of its size), so a large blob costs memory of a few windows and time in
proportion to its size.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentc.core.secrets import ScanLimit, described, scan

WINDOW = 8 * 1024 * 1024
OVERLAP = 64 * 1024  # far more than the longest encoding of a token or key the scan decodes
KNOWN_TOKEN = "a known token"  # noqa: S105 (a finding, not a secret)
UNSCANNABLE = "content whose nested encodings decode to more than the scan reads"
_DIGEST = re.compile(r"[0-9a-f]{64}")


def is_digest(value: str) -> bool:
    return bool(_DIGEST.fullmatch(value))


class Scanner:
    """Looks for the tokens whose SHA-256 hex digests it is given, and for secret formats."""

    def __init__(self, digests: Iterable[str]) -> None:
        self.digests = frozenset(digests)
        bad = [d for d in self.digests if not is_digest(d)]
        if bad:
            raise ValueError("a known digest must be 64 lowercase hex digits")

    def scan(self, data: bytes) -> str | None:
        """What secret ``data`` carries, and how it is encoded (``a known token (encoded as
        base64(text))``), or None."""
        try:
            found = scan(data)
        except ScanLimit:
            return UNSCANNABLE
        if found.format is not None:
            return described(found.format.kind, found.format.encoding)
        for digest, encoding in found.tokens.items():
            if digest in self.digests:
                return described(KNOWN_TOKEN, encoding)
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
