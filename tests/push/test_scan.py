"""The helper's scanner (known digests and formats, windowed) and the protocol's request and
answer shapes. The scanner's encodings and formats are core's (tests/core/test_secrets.py)."""

from __future__ import annotations

import base64
import random

import pytest

from agentc.core.errors import ConfigError
from agentc.core.rules import check_id
from agentc.core.secrets import verifier
from agentc.push.protocol import (
    ProtocolError,
    Request,
    encode_request,
    parse_answer,
    parse_request,
)
from agentc.push.refs import candidate_ref, wip_ref
from agentc.push.scan import OVERLAP, WINDOW, Scanner
from tests.core import kit

TOKEN = kit.token()
SCANNER = Scanner([verifier(TOKEN)])
KNOWN = "a known token (in plain text)"


@pytest.mark.parametrize(
    "text",
    [
        TOKEN,
        f'token = "{TOKEN}"',
        f"AGENT_COORDINATOR_TOKEN={TOKEN}",
        f"Authorization: Bearer {TOKEN}\r\n",
        f"https://agent:{TOKEN}@forge.example/repo.git",
        f"the token is {TOKEN}.",
        f"cache/{TOKEN}.json",
        f"KEY={TOKEN}==",
        f'{{"token":"{TOKEN}"}}',
    ],
    ids=lambda text: text.replace(TOKEN, "TOKEN"),  # the same ids in every collection
)
def test_a_known_token_is_found_in_its_usual_contexts(text: str) -> None:
    assert SCANNER.scan(text.encode()) == KNOWN


def test_only_known_tokens_are_findings() -> None:
    assert SCANNER.scan(kit.token().encode()) is None  # another token-shaped string
    assert SCANNER.scan(f"ab{TOKEN}".encode()) is None  # glued to hex digits: another string
    assert SCANNER.scan(TOKEN[:-1].encode()) is None
    encoded = base64.b64encode(TOKEN[::-1].encode())
    assert SCANNER.scan(encoded) == "a known token (encoded as base64(reversed(text)))"


def test_an_encoded_token_across_a_window_edge_is_found() -> None:
    encoded = base64.b64encode(f"token={TOKEN}".encode())
    filler = (
        random.Random(24).randbytes(3 * WINDOW // 4).hex().encode()[: WINDOW - len(encoded) // 2]
    )
    data = filler + b"\n" + encoded + b"\n" + b"b " * 100
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    assert SCANNER.scan_stream(chunks) == "a known token (encoded as base64(text))"
    assert SCANNER.scan_stream([b"clean " * 1000]) is None
    assert OVERLAP > 4096


def test_formats_are_found_without_digests() -> None:
    key = kit.FORMATS["a private key"]()
    assert Scanner([]).scan(key.encode()) == "a private key (in plain text)"
    assert Scanner([]).scan(b"-----BEGIN PUBLIC KEY-----\n") is None
    aws = kit.FORMATS["an AWS access key id"]()
    assert Scanner([]).scan(aws.encode().hex().encode()) == (
        "an AWS access key id (encoded as hex(text))"
    )


def test_digests_must_be_sha256_hex() -> None:
    with pytest.raises(ValueError, match="64 lowercase hex"):
        Scanner(["ABC"])


def test_requests_carry_exactly_op_and_revision() -> None:
    rev = "a" * 40
    assert parse_request(encode_request(Request("wip", rev)).strip()) == Request("wip", rev)
    assert parse_request(f'{{"op":"candidate","revision":"{"b" * 64}"}}'.encode()).op == (
        "candidate"
    )
    for line, problem in [
        (b"", "not a JSON line"),
        (b"\xff", "not a JSON line"),
        (b'"candidate"', "not a JSON object"),
        (b'{"op": "candidate"}', "lacks revision"),
        (f'{{"op":"wip","revision":"{rev}","ref":"refs/heads/x"}}'.encode(), "'ref'"),
        (f'{{"op":"merge","revision":"{rev}"}}'.encode(), "op must be"),
        (f'{{"op":"wip","revision":"{rev[:-1]}"}}'.encode(), "full commit id"),
        (f'{{"op":"wip","revision":{1}}}'.encode(), "full commit id"),
    ]:
        with pytest.raises(ProtocolError, match=problem):
            parse_request(line)


def test_answers_are_checked() -> None:
    assert parse_answer(b'{"ok": false, "error": "no"}') == {"ok": False, "error": "no"}
    for line in (b"[]", b'{"ok": 1}', b'{"ok": true}', b'{"ok": false}', b"nope"):
        with pytest.raises(ProtocolError):
            parse_answer(line)


def test_refs_are_derived_from_safe_ids() -> None:
    assert candidate_ref("t-1", "s.2") == "refs/agent-coordinator/candidates/t-1/s.2"
    rev = "c" * 40
    assert wip_ref("t", "s", rev) == f"refs/agent-coordinator/candidates/wip/t/s/{rev}"
    for bad in ("", "..", "a..b", "a/b", "-x", ".x", "x.", "x.lock", "a b", "a" * 129, "é"):
        with pytest.raises(ConfigError, match="not a safe id"):
            check_id("task", bad)
