"""The strict JSON body parser: standard JSON reads back as json.loads reads it; anything else
(non-finite numbers, too deep, unpaired surrogates, not UTF-8, not JSON) is a JSONDecodeError
whose message says what is wrong (the service answers it with 400 naming the problem)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from starlette.requests import Request

from agentc.core.model import JSON_DEPTH_MAX
from agentc.service.api import presented, url_path
from agentc.service.auth import Presented, browser_cookie
from agentc.service.request import parse_json
from tests.service.kit import Service

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


# -- the request's credentials and path, read from the raw ASGI scope ----------------------

_CREDENTIAL_NAMES = [
    "authorization",
    "cookie",
    "x-coordinator-session",
    "x-coordinator-session-proof",
    "origin",
    "x-csrf-token",
]
_header_values = st.one_of(
    st.sampled_from(
        ["Bearer acp_" + "x" * 40, "bearer  tok ", "Basic abc", "Bearer", "", "a=1; b=2"]
    ),
    st.sampled_from(["agentc_session=s1", "__Host-agentc_session=s2; x=y", "agentc_session="]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=20),
)
_headers = st.lists(
    st.tuples(st.sampled_from([*_CREDENTIAL_NAMES, "host", "content-type"]), _header_values),
    max_size=8,
)


def _scope(headers: list[tuple[str, str]], https: bool, path: str = "/") -> dict[str, Any]:
    runtime = SimpleNamespace(settings=SimpleNamespace(https=https))
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": b"",
        "headers": [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers],
        "app": SimpleNamespace(state=SimpleNamespace(runtime=runtime)),
    }


def _presented_by_starlette(request: Request) -> Presented:
    """What the credentials are by Starlette's own reading of the headers and cookies."""
    h = request.headers
    auth = h.getlist("authorization")
    bearer = None
    if auth:
        scheme, _, token = auth[0].partition(" ")
        bearer = (token.strip() if scheme.lower() == "bearer" else "") or "-"
    once = ("authorization", "x-coordinator-session", "x-coordinator-session-proof")
    return Presented(
        bearer=bearer,
        cookie=browser_cookie(request.cookies, request.app.state.runtime.settings.https),
        session_id=h.get("x-coordinator-session"),
        proof=h.get("x-coordinator-session-proof"),
        origin=h.get("origin"),
        csrf=h.get("x-csrf-token"),
        duplicated=any(len(h.getlist(n)) > 1 for n in once),
    )


@given(_headers, st.booleans())
@example([("authorization", "Bearer a"), ("authorization", "Bearer b")], False)
@example([("cookie", "agentc_session=one"), ("cookie", "agentc_session=two")], False)
@example([("cookie", "__Host-agentc_session=s; agentc_session=t")], True)
def test_presented_reads_the_headers_as_starlette_does(
    headers: list[tuple[str, str]], https: bool
) -> None:
    scope = _scope(headers, https)
    assert presented(Request(scope)) == _presented_by_starlette(Request(scope))


@given(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40))
@example("/a?b#c\\d")
@example("//double")
def test_url_path_is_what_starlette_gives(tail: str) -> None:
    scope = _scope([("host", "127.0.0.1:8000")], False, "/" + tail)
    assert url_path(scope) == Request(scope).url.path


def test_a_repeated_credential_header_is_refused(svc: Service) -> None:
    agent = svc.agent()
    for name in ("Authorization", "X-Coordinator-Session", "X-Coordinator-Session-Proof"):
        headers = [*agent.headers.items(), (name, agent.headers[name])]
        resp = svc.client.request("GET", "/api/v1/projects", headers=headers)
        assert resp.status_code == 401, name
        assert "exactly one credential" in resp.json()["error"]["message"]
    assert agent.raw("GET", "/api/v1/projects").status_code == 200
