"""The secret scanner (agentc.core.secrets): every encoding of a token, every format, and no
finding in ordinary text, binary data or this repository's own files."""

from __future__ import annotations

import base64
import os
import random
import secrets
import subprocess
from pathlib import Path

import pytest

from agentc.core.secrets import (
    FORMATS,
    MAX_DEPTH,
    PLAIN,
    Known,
    ScanLimit,
    scan,
    verifier,
)
from tests.core import kit

REPOSITORY = Path(__file__).resolve().parents[2]
# Random data, the same in every run: a format's shape occurs in random base64 by chance, very
# rarely, and a test must not depend on the draw.
RANDOM = random.Random(24)


@pytest.mark.parametrize("name", sorted(kit.ENCODINGS))
def test_a_token_is_found_in_each_encoding(name: str) -> None:
    encode, label = kit.ENCODINGS[name]
    token = kit.token()
    for text in (encode(token), f"note: {encode(token)} (done)", f'{{"x": "{encode(token)}"}}'):
        found = scan(text)
        assert found.tokens.get(verifier(token)) == label, (name, text)
        assert found.format is None


@pytest.mark.parametrize(
    "context",
    [
        "{}",
        'token = "{}"',
        "AGENT_COORDINATOR_TOKEN={}",
        "Authorization: Bearer {}\r\n",
        "https://agent:{}@forge.example/repo.git",
        "the token is {}.",
        "cache/{}.json",
        "x{}",  # glued to a letter that is not a hex digit: still the token
    ],
)
def test_a_token_is_found_in_its_usual_contexts(context: str) -> None:
    token = kit.token()
    assert verifier(token) in scan(context.format(token)).tokens


def test_a_token_glued_to_hex_digits_is_another_string() -> None:
    token = kit.token()
    assert verifier(token) not in scan("ab" + token).tokens
    assert verifier(token) not in scan(token[:-1]).tokens


def test_a_token_glued_inside_base64_still_decodes() -> None:
    """A base64 run glued to other letters decodes at one of its four alignments."""
    token = kit.token()
    for glue in ("Q", "QQ", "QQQ", "QQQQQ"):
        encoded = glue + base64.b64encode(token.encode()).decode()
        assert scan(encoded).tokens.get(verifier(token)) == "base64(text)", glue


@pytest.mark.parametrize(
    "context", ["cache/{}.json", "{}/index.html", "xy{}", "{}Q", "key={}", "dir/{}=="]
)
def test_a_tokens_raw_bytes_are_found_standing_on_their_own(context: str) -> None:
    """The base64 of 32 bytes is found alone, as a path component, or with up to three
    characters glued on; inside longer base64 it is other bytes."""
    token = kit.token()
    raw = base64.urlsafe_b64encode(bytes.fromhex(token)).decode().rstrip("=")
    assert scan(context.format(raw)).tokens.get(verifier(token)) == "base64(raw bytes)"
    assert verifier(token) not in scan("QUJD" + raw).tokens


@pytest.mark.parametrize("kind", sorted(kit.FORMATS))
def test_each_format_is_found_plain_and_encoded(kind: str) -> None:
    secret = kit.FORMATS[kind]()
    assert scan(f"config: {secret}\n").format is not None
    found = scan(f"config: {secret}\n").format
    assert found is not None and (found.kind, found.encoding) == (kind, PLAIN)
    encoded = base64.b64encode(f"SECRET={secret}".encode()).decode()
    found = scan(encoded).format
    assert found is not None and (found.kind, found.encoding) == (kind, "base64(text)")
    found = scan(secret[::-1]).format
    assert found is not None and (found.kind, found.encoding) == (kind, "reversed(text)")


def test_the_formats_listed_are_the_formats_tested() -> None:
    assert sorted(kind for kind, _ in FORMATS) == sorted(kit.FORMATS)


@pytest.mark.parametrize(
    "text",
    [
        "AKIA" + "IOSFODNN7" + "EXAMPLE",  # AWS's documented example key
        "gh" + "p_" + "x" * 36,  # a placeholder
        "sk" + "_live_" + "0" * 24,
        "Xgh" + "p_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",  # inside a longer word
        "sk" + "_test_" + "aB3dE5gH7jK9mN1pQ3sT5vW7",  # a test key, not a live one
        "-----BEGIN " + "PUBLIC KEY-----",
        "`-----BEGIN ... PRIVATE" + " KEY-----`",
        "a sha-1 " + "0" * 40 + " and a sha-256 id " + "f" * 63,
    ],
)
def test_placeholders_and_near_misses_are_not_findings(text: str) -> None:
    found = scan(text)
    assert found.format is None


def test_random_bytes_and_prose_are_clean() -> None:
    for _ in range(20):
        data = RANDOM.randbytes(64 * 1024)
        assert scan(data).format is None
    prose = (REPOSITORY / "README.md").read_text() * 20
    assert scan(prose).format is None


def test_no_file_of_this_repository_carries_a_secret() -> None:
    """The push helper scans what an agent pushes to this very repository: its files, tests
    included, must pass (fixtures are made at run time, tests/core/kit.py)."""
    listed = subprocess.run(
        ["git", "-C", str(REPOSITORY), "ls-files", "-z"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.split(b"\0")
    paths = [REPOSITORY / os.fsdecode(name) for name in listed if name]
    assert len(paths) > 100
    for path in paths:
        if path.is_file():  # a file this branch deletes is still listed until committed
            found = scan(path.read_bytes())
            assert found.format is None, f"{path}: {found.format}"


def test_nesting_deeper_than_the_scan_goes_is_not_decoded() -> None:
    token = kit.token()
    text = token.encode()
    for _ in range(MAX_DEPTH):
        text = base64.b64encode(text)
    assert verifier(token) in scan(text).tokens
    assert verifier(token) not in scan(base64.b64encode(text)).tokens


def test_the_work_is_bounded() -> None:
    """Nested encodings that decode to more than the limit are refused, not skipped."""
    text = RANDOM.randbytes(3000).hex().encode()
    for _ in range(2):
        text = base64.b64encode(text)
    scan(text)  # the default limit reads it all
    with pytest.raises(ScanLimit, match="nested encodings"):
        scan(text, limit=3 * len(text))


def test_a_large_blob_is_scanned_in_bounded_time_and_memory() -> None:
    """8 MiB of base64 (the push helper's window) with a token at the end (on a line of its
    own, so its decoding does not glue it to the random bytes before it)."""
    token = kit.token()
    encoded = base64.b64encode(f"token: {token}".encode())
    blob = base64.b64encode(RANDOM.randbytes(6 << 20)) + b"\n" + encoded
    assert scan(blob).tokens.get(verifier(token)) == "base64(text)"


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("0{}", "plain"),
        ("{}deadbeef", "plain"),
        ("beef{}", "reversed(text)"),  # reversed below
        ("base64:{b64}", "base64(text)"),
        ("QUJDRA{raw}", "base64(raw bytes)"),
    ],
)
def test_a_known_secret_is_found_glued_to_anything(text: str, label: str) -> None:
    """What the caller holds as text (the request's own credential) is found as it is, where
    a verifier needs the token to stand alone."""
    token = kit.token()
    glued = "ab" + token + "cd"
    b64 = base64.b64encode(glued.encode()).decode()
    raw = base64.b64encode(bytes.fromhex(token)).decode().rstrip("=")
    filled = text.format(token, b64=b64, raw=raw)
    if label.startswith("reversed"):
        filled = filled[::-1]
    found = scan(filled, known=Known([token]))
    assert found.known == {token: label}
    assert verifier(token) not in scan(f"0{token}0").tokens  # by verifier alone: another string


def test_a_known_secret_of_any_shape_is_found() -> None:
    """A session proof a client made is any 32 to 512 visible characters."""
    proof = "p!" + secrets.token_urlsafe(40) + "~"
    known = Known([proof])
    assert scan(f"see {proof}.", known=known).known == {proof: "plain"}
    encoded = base64.b64encode(proof.encode()).decode()
    assert scan(encoded, known=known).known == {proof: "base64(text)"}
    assert scan("nothing here", known=known).known == {}


def test_a_finding_names_the_kind_never_the_secret() -> None:
    token = kit.token()
    found = scan(base64.b64encode(token.encode()))
    assert found.tokens and all(token not in label for label in found.tokens.values())
