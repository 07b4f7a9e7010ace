"""The secret scanner's token shape and the protocol's request and answer shapes."""

from __future__ import annotations

import hashlib
import secrets

import pytest

from agentc.core.errors import ConfigError
from agentc.push.protocol import (
    ProtocolError,
    Request,
    encode_request,
    parse_answer,
    parse_request,
)
from agentc.push.refs import candidate_ref, check_id, wip_ref
from agentc.push.scan import KNOWN_TOKEN, OVERLAP, PRIVATE_KEY, WINDOW, Scanner

TOKEN = secrets.token_urlsafe(32)
SCANNER = Scanner([hashlib.sha256(TOKEN.encode()).hexdigest()])


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
)
def test_a_known_token_is_found_in_its_usual_contexts(text: str) -> None:
    assert SCANNER.scan(text.encode()) == KNOWN_TOKEN


def test_other_tokens_and_glued_tokens_are_not_matches() -> None:
    assert SCANNER.scan(secrets.token_urlsafe(32).encode()) is None
    assert SCANNER.scan(f"x{TOKEN}".encode()) is None  # no longer the token
    assert SCANNER.scan(TOKEN[:-1].encode()) is None


def test_a_token_across_a_window_edge_is_found() -> None:
    filler = b"a " * ((WINDOW - 10) // 2)
    data = filler + TOKEN.encode() + b"\n" + b"b " * 100
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    assert SCANNER.scan_stream(chunks) == KNOWN_TOKEN
    assert SCANNER.scan_stream([b"clean " * 1000]) is None
    assert OVERLAP > 4096


@pytest.mark.parametrize("kind", ["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "PGP "])
def test_private_key_armour_is_found(kind: str) -> None:
    block = " BLOCK" if kind == "PGP " else ""
    armour = f"-----BEGIN {kind}PRIVATE" + f" KEY{block}-----\nMIIE\n"
    assert Scanner([]).scan(armour.encode()) == PRIVATE_KEY
    assert Scanner([]).scan(b"-----BEGIN PUBLIC KEY-----\n") is None
    assert Scanner([]).scan(b"`-----BEGIN ... PRIVATE KEY-----`") is None


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
            check_id(bad, "task")
