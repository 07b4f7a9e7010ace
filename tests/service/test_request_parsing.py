"""The strict JSON body parser: standard JSON reads back as json.loads reads it; anything else
(non-finite numbers, too deep, unpaired surrogates, not UTF-8, not JSON) is a JSONDecodeError
whose message says what is wrong (the service answers it with 400 naming the problem)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentc.core.model import JSON_DEPTH_MAX
from agentc.service.request import parse_json

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@given(documents, st.booleans())
def test_standard_json_reads_back_unchanged(value: Any, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    if _depth(value) > JSON_DEPTH_MAX:
        with pytest.raises(json.JSONDecodeError):
            parse_json(body)
    else:
        assert parse_json(body) == json.loads(body)


@given(st.binary(max_size=200))
@example(b"NaN")
@example(b"[-Infinity]")
@example(b'{"a": 1e999}')
@example(b'"\\udc00"')
@example(b'"\\ud83d\\ude00"')
@example(b"\xed\xa0\x80")
@example(b"[" * 2000 + b"]" * 2000)
@example(b"1" * 5000)
def test_any_bytes_parse_or_are_refused_with_a_reason(body: bytes) -> None:
    try:
        value = parse_json(body)
    except json.JSONDecodeError as err:
        assert err.msg
    else:
        assert json.loads(json.dumps(value, allow_nan=False)) == value
        assert _depth(value) <= JSON_DEPTH_MAX
        json.dumps(value, ensure_ascii=False).encode()  # valid Unicode throughout


@pytest.mark.parametrize(
    "body, problem",
    [
        (b'{"usd": NaN}', "NaN is not a JSON number"),
        (b'{"usd": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"usd": 1e400}', "1e400 is out of range"),
        (b'["\\ud800"]', "unpaired surrogate"),
        (b"[" * (JSON_DEPTH_MAX + 1) + b"]" * (JSON_DEPTH_MAX + 1), "nested deeper than"),
        (b'{"a": }', "malformed JSON: Expecting value (line 1 column 7)"),
        (b"\xff", "not UTF-8"),
    ],
)
def test_a_refusal_says_what_is_wrong(body: bytes, problem: str) -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        parse_json(body)
    assert problem in info.value.msg


def test_the_deepest_accepted_body() -> None:
    body = b"[" * JSON_DEPTH_MAX + b"]" * JSON_DEPTH_MAX
    assert _depth(parse_json(body)) == JSON_DEPTH_MAX
