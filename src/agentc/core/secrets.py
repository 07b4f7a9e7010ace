"""Secrets in text (pure): the coordinator's own tokens in the usual encodings, and the common
secret formats. One scanner for the service (agent text, docs/api.md) and the push helper
(pushed content, docs/push.md); docs/security.md "Secret scanning" says what it finds and why.

Two kinds of finding:

- **Formats** (:data:`FORMATS`): text shaped like a well-known kind of secret (a private key
  block, an AWS access key id, a GitHub token...), each a pattern with a distinctive prefix, so
  a match is almost surely a real secret.
- **Tokens**: the coordinator's secrets (credentials, session proofs, browser sessions) are 64
  lowercase hex characters, and whoever scans knows them only by their SHA-256 verifiers. So a
  scan returns the verifier of every token-shaped string (64 hex digits, any case, not glued to
  another hex digit) it sees, and of the 32 bytes (and them reversed) that standing base64 of
  that length decodes to (alone, a path component, or with up to three characters glued on:
  a token's raw bytes); the caller looks the verifiers up among the secrets it knows.

Both are looked for in every *view* of the text: the text itself, the text reversed, and what
its base64 runs (standard or URL-safe alphabet, wrapped lines joined, at each of the four
alignments, so a run glued to other letters still decodes; a run of hex digits alone is read
as hex only) and hex runs (contiguous, wrapped, or bytes separated by spaces or colons, at both
alignments) decode to, recursively up to
:data:`MAX_DEPTH` decodings; a decoded view is reversed and decoded further only when it is
text (no control characters), which real encodings are and decoding garbage is not. A finding
names its encoding from the outside in: ``base64(reversed(text))`` is the base64 of the
reversed token. The work is bounded: the views of one text may total at most
:data:`BUDGET_FACTOR` times its size (plus :data:`BUDGET_FLOOR`); past that the scan raises
:class:`ScanLimit`, so content cannot hide a secret by burying it deeper than the scan goes.
A small text that cannot hold any finding (shorter than the shortest, an id or UUID, or without
a long enough run: :func:`_worth_a_look`) is passed after a few searches.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from agentc.core.errors import AgentcError

TOKEN_HEX = 64
MAX_DEPTH = 3
BUDGET_FACTOR = 32
BUDGET_FLOOR = 1 << 20
# The shortest runs worth decoding: the base64 (27 characters) and the hex (40 digits) of the
# shortest secret found (an AWS access key id, 20 characters).
MIN_BASE64 = 27
MIN_HEX = 40
_RAW_BASE64 = 43  # the base64 of a token's 32 raw bytes, unpadded
PLAIN = "plain"
REVERSED = "reversed"
# The coordinator's error code for text it refuses because it carries a secret (docs/api.md).
REFUSED = "secret_detected"

# (kind, patterns) of each format; the kinds are what a refusal names. Each pattern starts with
# a literal (so a search skips ahead at C speed) and, but for a private key, must not be glued
# to a letter or digit on its left (a prefix inside a longer word is not a key).
FORMATS: tuple[tuple[str, tuple[bytes, ...]], ...] = (
    ("a private key", (rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----",)),
    (
        "an AWS access key id",
        (rb"AKIA[0-9A-Z]{16}(?![0-9A-Za-z])", rb"ASIA[0-9A-Z]{16}(?![0-9A-Za-z])"),
    ),
    (
        "a GitHub token",
        (
            rb"gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9_])",
            rb"github_pat_[A-Za-z0-9_]{82,}",
        ),
    ),
    ("a GitLab token", (rb"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}",)),
    ("a Slack token", (rb"xox[abposr]-[0-9]{6,}-[A-Za-z0-9-]{8,}",)),
    ("an Anthropic API key", (rb"sk-ant-[a-z]{3,8}[0-9]{2}-[A-Za-z0-9_-]{80,}",)),
    (
        "an OpenAI API key",
        (
            rb"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})",
        ),
    ),
    ("a Google API key", (rb"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",)),
    ("a Stripe live key", (rb"sk_live_[0-9A-Za-z]{20,}", rb"rk_live_[0-9A-Za-z]{20,}")),
)
_SYNTAX = re.compile(rb"[^A-Za-z0-9_ -]")
# Each pattern with its literal start (up to its first piece of syntax), looked for first:
# ``in`` is far cheaper than a regular expression's search on the many small views of a text.
_FORMATS = [
    (kind, _SYNTAX.split(p, maxsplit=1)[0], re.compile(p))
    for kind, patterns in FORMATS
    for p in patterns
]
_PRIVATE_KEY = FORMATS[0][0]
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
# Documentation's placeholders: AWS's published example keys end in EXAMPLE, and a body of one
# repeated character (ghp_xxxx...) is no key; a real key's random part has many characters.
_MIN_DISTINCT = 6
_EXAMPLE = b"EXAMPLE"


def _mask(keep: dict[bytes, bytes]) -> bytes:
    """A translation table: each byte of a key to its value's byte, every other byte to '.'."""
    table = bytearray(b"." * 256)
    for chars, to in keep.items():
        for char in chars:
            table[char] = to[0]
    return bytes(table)


# Runs are found in a view's masks with ``bytes.find`` (C speed; a regular expression starting
# with a character class is tried at every byte, dozens of times slower on large blobs).
_DIGITS = b"0123456789ABCDEFabcdef"
_HEX_MASK = _mask({_DIGITS: b"h", b" :": b"s", b"\r\n": b"n"})
_B64_MASK = _mask(
    {_DIGITS + b"GHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz+/_-": b"b", b"=": b"=", b"\r\n": b"n"}
)
_TOKEN_RUN = (b"h" * TOKEN_HEX, re.compile(rb"h*"))
_HEX_RUN = (b"h" * 32, re.compile(rb"[hn]*"))  # hex digits, wrapped lines joined
_HEX_BYTES_RUN = (b"hhs" * 8, re.compile(rb"[hs]*"))  # bytes apart: "de ad be ef", "de:ad"
_B64_RUN = (b"b" * MIN_BASE64, re.compile(rb"[b=n]*"))  # base64, wrapped lines joined
_UPPER_HEX = re.compile(rb"[A-F]")
_TOKEN_TEXT = re.compile(r"[0-9a-f]{64}")
_NOT_TEXT = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_URL_SAFE = bytes.maketrans(b"-_", b"+/")
_SEPARATORS = re.compile(rb"[\r\n :]")
SMALL = 1 << 16
SHORTEST = 20  # the shortest finding, in characters: an AWS access key id
# Ids, UUIDs and short hashes (hex digits and dashes) hold none, nor do names in lower case (a
# field's, a key's), when too short to be a token or a hex decoding: no format and no real
# key's base64 is written in hex digits alone or in lower-case letters alone.
_ID = re.compile(rb"[0-9A-Fa-f-]{0,%d}|[a-z_]{0,%d}" % (MIN_HEX - 1, MIN_HEX - 1))
# The formats shorter than a base64 run worth decoding start with one of these (or, reversed,
# end with one of their reverses).
_SHORT_STARTS = tuple(
    literal
    for start in (b"AKIA", b"ASIA", b"xox", b"glpat-", b"gldt-", b"glrt-", b"glptt-")
    for literal in (start, start[::-1])
)
_ARMOUR = (b"PRIVATE KEY", b"YEK ETAVIRP")


def _worth_a_look(raw: bytes) -> bool:
    """Whether ``raw`` (or its reverse) holds what any finding needs: a base64 run as long as
    the shortest the scan decodes (any token and most formats are such runs too), the start of
    a shorter format in a run as long as it, a key's armour, or hex bytes apart. A small text
    without any is clean, passed after these few searches (the service scans every agent
    request)."""
    runs = raw.translate(_B64_MASK)
    if _B64_RUN[0] in runs:
        return True
    if b"b" * SHORTEST in runs and any(start in raw for start in _SHORT_STARTS):
        return True
    return any(armour in raw for armour in _ARMOUR) or (
        _HEX_BYTES_RUN[0] in raw.translate(_HEX_MASK)
    )


def _spans(mask: bytes, run: tuple[bytes, re.Pattern[bytes]]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each run in ``mask``: from the first place its needle occurs as far
    as its pattern goes on matching."""
    needle, rest = run
    pos = 0
    while (start := mask.find(needle, pos)) >= 0:
        more = rest.match(mask, start + len(needle))  # a repetition: it always matches
        pos = more.end() if more is not None else start + len(needle)
        yield start, pos


class ScanLimit(AgentcError, ValueError):
    """The text decodes to more than the scan's budget (see the module's docstring)."""


@dataclass(frozen=True)
class Finding:
    """A format found: its kind and how it was encoded."""

    kind: str
    encoding: str


@dataclass
class Found:
    """What one scan found: the first format finding, the verifier of every token-shaped
    string with the encoding it was first seen in, and each known secret found (see
    :func:`scan`) with its encoding."""

    format: Finding | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    known: dict[str, str] = field(default_factory=dict)


def verifier(token: str) -> str:
    """The SHA-256 hex digest of a token's text: what the coordinator keeps of a secret."""
    return hashlib.sha256(token.encode()).hexdigest()


def described(kind: str, encoding: str) -> str:
    """A finding as a refusal names it: ``a GitHub token (in plain text)``, ``a known token
    (encoded as base64(reversed(text)))``; never the secret."""
    how = "in plain text" if encoding == PLAIN else f"encoded as {encoding}"
    return f"{kind} ({how})"


def _label(steps: tuple[str, ...], inner: str) -> str:
    """The encoding of a finding: ``steps`` are the decodings from the outside in."""
    if not steps and inner == "text":
        return PLAIN
    for step in reversed(steps):
        inner = f"{step}({inner})"
    return inner


class Known:
    """Secrets the caller holds as text, to find as they are (see :func:`scan`). Built once
    for every text of a request; what to look for is worked out only when a text needs it."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(secrets)
        # A text holding a token (or any long base64-alphabet run) as it is passes the quick
        # check anyway; only other secrets are looked for before it.
        self.odd = tuple(
            variant
            for secret in self.secrets
            if not _TOKEN_TEXT.fullmatch(secret) and not _worth_a_look(secret.encode())
            for variant in (secret.encode(), secret.encode()[::-1])
        )

    @functools.cached_property
    def needles(self) -> list[tuple[bytes, str, str]]:
        """``(bytes, the secret, how they encode it)``: each secret's text and upper case, and
        for a token its raw bytes and them reversed (found in decoded views)."""
        needles = []
        for secret in self.secrets:
            needles.append((secret.encode(), secret, "text"))
            if secret.upper() != secret:
                needles.append((secret.upper().encode(), secret, "upper(text)"))
            if _TOKEN_TEXT.fullmatch(secret):
                raw = bytes.fromhex(secret)
                needles.append((raw, secret, "raw bytes"))
                needles.append((raw[::-1], secret, "reversed(raw bytes)"))
        return needles

    def in_plain(self, raw: bytes) -> bool:
        """Whether ``raw`` holds, as it is or reversed, a secret the quick check would miss."""
        return any(variant in raw for variant in self.odd)


NONE_KNOWN = Known()


class _Scan:
    def __init__(self, budget: int, known: Known) -> None:
        self.found = Found()
        self.budget = budget
        self.needles = known.needles

    def view(self, data: bytes, steps: tuple[str, ...], depth: int, text: bool) -> bool:
        """Scan one view ``depth`` decodings deep (and, when it is text, its reverse and its
        decodings); True when a format was found (the scan stops there)."""
        self.budget -= len(data)
        if self.budget < 0:
            raise ScanLimit("its nested encodings decode to more than the scan reads")
        for needle, secret, inner in self.needles:
            if secret not in self.found.known and needle in data:
                self.found.known[secret] = _label(steps, inner)
        if self._formats(data, steps):
            return True
        hex_mask = data.translate(_HEX_MASK)
        self._tokens(data, hex_mask, steps)
        if not text:
            return False
        if depth < MAX_DEPTH and self._decodings(data, hex_mask, steps, depth + 1):
            return True
        if steps and steps[-1] == REVERSED:
            return False
        return self.view(data[::-1], (*steps, REVERSED), depth, True)

    def _formats(self, data: bytes, steps: tuple[str, ...]) -> bool:
        for kind, start, pattern in _FORMATS:
            if start not in data:
                continue
            for match in pattern.finditer(data):
                at, value = match.start(), match.group()
                if kind != _PRIVATE_KEY and (
                    (at > 0 and data[at - 1] in _WORD)
                    or len(set(value[len(start) :])) < _MIN_DISTINCT
                    or value.endswith(_EXAMPLE)
                ):
                    continue
                self.found.format = Finding(kind, _label(steps, "text"))
                return True
        return False

    def _tokens(self, data: bytes, hex_mask: bytes, steps: tuple[str, ...]) -> None:
        for start, end in _spans(hex_mask, _TOKEN_RUN):
            if end - start == TOKEN_HEX:
                token = data[start:end]
                inner = "upper(text)" if _UPPER_HEX.search(token) else "text"
                self._token(token.decode().lower(), steps, inner)

    def _token(self, token: str, steps: tuple[str, ...], inner: str) -> None:
        self.found.tokens.setdefault(verifier(token), _label(steps, inner))

    def _decodings(self, data: bytes, hex_mask: bytes, steps: tuple[str, ...], depth: int) -> bool:
        """Scan what the view's base64 and hex runs decode to (``depth`` decodings deep)."""
        for start, end in _spans(data.translate(_B64_MASK), _B64_RUN):
            if _HEX_RUN[1].fullmatch(hex_mask, start, end):
                continue  # hex digits alone: decoded as hex below (no secret's base64 is)
            run = data[start:end]
            step = (*steps, "base64")
            for raw in _raw_tokens(run):  # a token's raw bytes, or them reversed
                self._token(raw.hex(), step, "raw bytes")
                self._token(raw[::-1].hex(), step, "reversed(raw bytes)")
            for decoded in _base64_views(run):
                if self.view(decoded, step, depth, _is_text(decoded)):
                    return True
        for run_kind in (_HEX_RUN, _HEX_BYTES_RUN):
            for start, end in _spans(hex_mask, run_kind):
                digits = _SEPARATORS.sub(b"", data[start:end])
                if len(digits) < MIN_HEX:
                    continue
                step = (*steps, "upper-case hex" if _UPPER_HEX.search(digits) else "hex")
                for decoded in _hex_views(digits):
                    if self.view(decoded, step, depth, _is_text(decoded)):
                        return True
        return False


def _is_text(data: bytes) -> bool:
    return not _NOT_TEXT.search(data)


def _decode_base64(piece: bytes) -> bytes:
    """``piece`` (standard alphabet, no padding) decoded, its last partial group included."""
    cut = len(piece) % 4
    piece = piece[:-1] if cut == 1 else piece + b"=" * ((4 - cut) % 4)
    return binascii.a2b_base64(piece)


def _base64_views(run: bytes) -> Iterator[bytes]:
    """What a base64 run decodes to: each part between padding, at each alignment."""
    joined = run.replace(b"\r", b"").replace(b"\n", b"").translate(_URL_SAFE)
    for part in joined.split(b"="):
        if len(part) >= MIN_BASE64:
            for offset in range(4):
                yield _decode_base64(part[offset:])


def _raw_tokens(run: bytes) -> Iterator[bytes]:
    """The 32 bytes that base64 standing on its own decodes to: a part of the run between
    padding, or its first or last path component (``cache/<it>.json``), of the base64 length
    of 32 bytes, or up to three characters more glued to either end."""
    joined = run.replace(b"\r", b"").replace(b"\n", b"")
    for part in joined.split(b"="):
        components = part.split(b"/")  # before "_" becomes "/": URL-safe names have it
        for piece in {part, components[0], components[-1]}:
            if _RAW_BASE64 <= len(piece) <= _RAW_BASE64 + 3:
                for cut in {piece[:_RAW_BASE64], piece[-_RAW_BASE64:]}:
                    yield _decode_base64(cut.translate(_URL_SAFE))


def _hex_views(digits: bytes) -> Iterator[bytes]:
    """What a run of hex digits decodes to, at both alignments."""
    for offset in (0, 1):
        piece = digits[offset:]
        yield binascii.unhexlify(piece[: len(piece) // 2 * 2])


def scan(data: bytes | str, *, limit: int | None = None, known: Known = NONE_KNOWN) -> Found:
    """Every finding in ``data`` (see the module's docstring). ``known``: secrets the caller
    holds as text (the service: the credential and proof of the request being screened),
    found in every view as they are, glued to anything or not. ``limit``: the most bytes the
    views may total (default :data:`BUDGET_FACTOR` times its size plus
    :data:`BUDGET_FLOOR`); past it, :class:`ScanLimit`."""
    raw = data.encode(errors="surrogatepass") if isinstance(data, str) else data
    if len(raw) < SHORTEST or (
        len(raw) <= SMALL
        and (_ID.fullmatch(raw) or not _worth_a_look(raw))
        and not known.in_plain(raw)
    ):
        return Found()
    state = _Scan(BUDGET_FACTOR * len(raw) + BUDGET_FLOOR if limit is None else limit, known)
    state.view(raw, (), 0, True)
    return state.found


def left_out(details: Mapping[str, object], what: str, quoted: str, kept: str) -> str:
    """The note that replaces ``what`` (a text quoting ``quoted``) when the coordinator refused
    it for a secret (``details`` of the refusal): which field, what kind of secret and how it was
    encoded, never the secret (the refusal names none); ``kept`` says where the text stays."""
    found = f"{details.get('kind', 'a secret')} ({details.get('encoding', 'unknown encoding')})"
    return (
        f"the {what} quoted {quoted}, and the coordinator refused it: its "
        f"{details.get('field', 'text')} carried {found}. That text is left out here; {kept}."
    )
