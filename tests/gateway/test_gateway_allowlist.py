"""What the gateway forwards: only the calls the harnesses make, per upstream (issue 14, item 1).

Everything else would reach the provider with the organization's real key: batches and chat
completions spend money unmetered, the files API lists the organization's files.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.gateway import kit

MakeStack = Any
REAL_KEY = "sk-ant-REAL-host-only-0123456789abcdef"
BODY = {"model": "claude-sonnet-5", "max_tokens": 64, "messages": []}

REFUSED = [
    ("POST", "/v1/messages/batches"),
    ("GET", "/v1/messages/batches"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("GET", "/v1/files"),
    ("POST", "/v1/files"),
    ("GET", "/v1/organizations/me"),
    ("POST", "/v1/embeddings"),
    ("GET", "/v1/messages"),  # an allowed path, another method
    ("POST", "/v1/models"),
    ("DELETE", "/v1/models/claude-sonnet-5"),
    ("POST", "/v1/messages/"),  # trailing slash
    ("POST", "//v1/messages"),
    ("POST", "/v1/messages/count_tokens/x"),
    # Dot segments: a client library upstream would normalize these into a refused path.
    ("GET", "/v1/models/../files"),
    ("GET", "/v1/models/%2e%2e/files"),
    ("POST", "/v1/models/..%2fmessages%2fbatches"),
    ("GET", "/v1/models/./x"),
    ("GET", "/v1/models/.."),
    ("GET", "/v1/models/a%2f..%2f..%2ffiles"),
    ("GET", "/v1/models/a%00b"),
]


@pytest.mark.parametrize(("upstream", "api"), [("claude", "anthropic"), ("codex", "openai")])
def test_other_calls_are_refused_in_the_api_shape_and_logged(
    make_stack: MakeStack, upstream: str, api: str
) -> None:
    with make_stack({"turns": []}) as stack:
        key = stack.issue(upstream=upstream)
        auth = {"x-api-key": key} if api == "anthropic" else {"authorization": f"Bearer {key}"}
        body = json.dumps(BODY).encode()
        answers = [
            kit.request(
                stack.url, method, target, {**auth, "content-type": "application/json"}, body
            )
            for method, target in REFUSED
        ]
        other_api = "/v1/responses" if api == "anthropic" else "/v1/messages"
        wrong = kit.request(stack.url, "POST", other_api, auth, body)
        assert stack.provider.requests == []
    for (method, target), answer in zip(
        [*REFUSED, ("POST", other_api)], [*answers, wrong], strict=True
    ):
        assert answer.status == 404, (method, target, answer)
        error = answer.json()["error"]
        if api == "anthropic":
            assert answer.json()["type"] == "error"
            assert error["type"] == "not_found_error"
        else:
            assert "type" not in answer.json()
            assert error["type"] == "invalid_request_error"
        assert error["message"].startswith(f"agentc: the model gateway does not forward {method}")
    lines = stack.log_lines()
    assert len(lines) == len(REFUSED) + 1
    assert {line["outcome"] for line in lines} == {"refused_path"}
    assert [(line["method"], line["status"]) for line in lines][:2] == [
        ("POST", 404),
        ("GET", 404),
    ]
    assert lines[0]["path"] == "/v1/messages/batches" and lines[0]["session"] == "s1"
    assert stack.ledger_rows() == []
    assert REAL_KEY not in stack.log.getvalue()


def test_count_tokens_and_models_are_forwarded_and_cost_nothing(make_stack: MakeStack) -> None:
    with make_stack({"turns": []}, caps={"launch_usd": 0.05}) as stack:
        key = stack.issue()
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        tools = {**BODY, "tools": [{"name": "Bash", "input_schema": {}}], "stream": True}
        counted = httpx.post(f"{stack.url}/v1/messages/count_tokens", json=tools, headers=headers)
        listed = httpx.get(f"{stack.url}/v1/models", headers=headers)
        one = httpx.get(f"{stack.url}/v1/models/claude-sonnet-5", headers=headers)
        codex = stack.issue("s2", upstream="codex")
        codex_models = httpx.get(
            f"{stack.url}/v1/models?client_version=1", headers={"authorization": f"Bearer {codex}"}
        )
        seen = [(r.method, r.path, r.query) for r in stack.provider.requests]
        keys = {
            r.headers.get("x-api-key") or r.headers.get("authorization")
            for r in stack.provider.requests
        }
        spent = stack.gateway.ledger.spent(stack.gateway.registry.check(key))
    assert [r.status_code for r in (counted, listed, one, codex_models)] == [200] * 4
    assert counted.json()["input_tokens"] > 0
    assert "claude-sonnet-5" in [m["id"] for m in listed.json()["data"]]
    assert one.json()["id"] == "claude-sonnet-5"
    assert codex_models.json()["object"] == "list"
    assert seen == [
        ("POST", "/v1/messages/count_tokens", ""),
        ("GET", "/v1/models", ""),
        ("GET", "/v1/models/claude-sonnet-5", ""),
        ("GET", "/v1/models", "client_version=1"),
    ]
    assert keys == {REAL_KEY, f"Bearer {REAL_KEY}"}
    # Not metered, no ledger row, nothing counted against any cap.
    assert stack.ledger_rows() == []
    assert spent == (0.0, 0.0, 0.0)
    assert {line["outcome"] for line in stack.log_lines()} == {"ok"}


def test_a_method_override_header_is_not_forwarded(make_stack: MakeStack) -> None:
    with make_stack({"turns": []}) as stack:
        headers = {"x-api-key": stack.issue(), "x-http-method-override": "DELETE"}
        r = httpx.get(f"{stack.url}/v1/models", headers=headers)
        seen = stack.provider.requests[0].headers
    assert r.status_code == 200
    assert "x-http-method-override" not in seen
