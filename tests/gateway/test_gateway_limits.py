"""What one launch may take of the shared gateway: body size, calls in flight (issue 14, item 3)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from agentc.gateway.config import GatewayConfig
from tests.gateway import kit

MakeStack = Any
MiB = 1024 * 1024
TOOLS = [{"name": "Bash", "input_schema": {}}]
BODY = {
    "model": "claude-sonnet-5",
    "stream": True,
    "max_tokens": 64,
    "tools": TOOLS,
    "messages": [],
}


def _padded(size: int) -> bytes:
    """A valid Messages body of exactly ``size`` bytes."""
    empty = json.dumps(dict(BODY, pad="")).encode()
    return json.dumps(dict(BODY, pad="p" * (size - len(empty)))).encode()


def _endless(total: int, chunk: int = MiB) -> Iterator[bytes]:
    block = b"z" * chunk
    for _ in range(total // chunk):
        yield block


def test_the_default_body_limit_is_32_mib() -> None:
    config = GatewayConfig.from_mapping(
        {"control_socket": "/c", "ledger": "/l", "vendors": "/v", "upstreams": {}}
    )
    assert config.max_body_bytes == 32 * MiB
    assert config.launch_concurrency >= 8


def test_a_96_mib_chunked_body_is_refused_while_streaming(make_stack: MakeStack) -> None:
    with make_stack({"turns": []}) as stack:
        headers = {"x-api-key": stack.issue(), "content-type": "application/json"}
        answer = kit.request(stack.url, "POST", "/v1/messages", headers, _endless(96 * MiB))
        assert kit.wait_for(lambda: bool(stack.log_lines()))
        assert stack.provider.requests == []
        line = stack.log_lines()[0]
    # The gateway stopped reading soon after 32 MiB; what the client could still push is what
    # the sockets' buffers held.
    assert answer.sent < 64 * MiB
    assert answer.status == 413, answer
    assert answer.json()["error"]["type"] == "request_too_large"
    assert (line["outcome"], line["status"]) == ("refused_body", 413)
    assert "max_body_bytes" in line["reason"]
    assert stack.ledger_rows() == []


def test_a_declared_length_over_the_limit_is_refused_before_reading(make_stack: MakeStack) -> None:
    with make_stack({"turns": []}, max_body_bytes=MiB) as stack:
        key = stack.issue(upstream="codex")
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        # Declares 96 MiB, sends nothing: the answer comes without waiting for the body.
        answer = kit.request(stack.url, "POST", "/v1/responses", headers, declared=96 * MiB)
        assert stack.provider.requests == []
    assert answer.status == 413
    assert "type" not in answer.json()  # the OpenAI shape
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert "max_body_bytes" in answer.json()["error"]["message"]
    assert stack.log_lines()[0]["outcome"] == "refused_body"


def test_a_body_at_the_limit_is_forwarded_whole(make_stack: MakeStack) -> None:
    limit = 256 * 1024
    with make_stack({"turns": [{"text": "ok"}, {"text": "ok"}]}, max_body_bytes=limit) as stack:
        key = stack.issue()
        headers = {"x-api-key": key, "content-type": "application/json"}
        at = kit.request(stack.url, "POST", "/v1/messages", headers, _padded(limit))
        chunked = kit.request(stack.url, "POST", "/v1/messages", headers, iter([_padded(limit)]))
        over = kit.request(stack.url, "POST", "/v1/messages", headers, _padded(limit + 1))
        over_chunked = kit.request(
            stack.url, "POST", "/v1/messages", headers, iter([_padded(limit + 1)])
        )
        bodies = [r.body for r in stack.provider.main_requests()]
    assert [at.status, chunked.status, over.status, over_chunked.status] == [200, 200, 413, 413]
    assert [len(json.dumps(b)) for b in bodies] == [limit, limit]
    assert bodies[0]["pad"] == bodies[1]["pad"]


def test_calls_in_flight_are_capped_per_launch(make_stack: MakeStack) -> None:
    paused = [{"text": f"t{i}", "pause": {"after_events": 1, "gate": f"g{i}"}} for i in range(2)]
    with make_stack({"turns": paused}, launch_concurrency=2) as stack:
        key = stack.issue("s1")
        headers = {"x-api-key": key}
        url = f"{stack.url}/v1/messages"
        with (
            httpx.stream("POST", url, json=BODY, headers=headers) as first,
            httpx.stream("POST", url, json=BODY, headers=headers) as second,
        ):
            lines1, lines2 = first.iter_lines(), second.iter_lines()
            assert next(lines1) == next(lines2) == "event: message_start"
            refused = httpx.post(url, json=BODY, headers=headers)
            # Another launch is not affected (a side request: no tools).
            other = httpx.post(
                url, json={"model": "m", "messages": []}, headers={"x-api-key": stack.issue("s2")}
            )
            assert stack.gateway.slots.in_flight("s1") == 2
            stack.provider.gate("g0").set()
            stack.provider.gate("g1").set()
            assert "event: message_stop" in list(lines1)
            assert "event: message_stop" in list(lines2)
        assert kit.wait_for(lambda: stack.gateway.slots.in_flight("s1") == 0)
        again = httpx.post(url, json=BODY, headers=headers)
        main = len(stack.provider.main_requests())
        lines = stack.log_lines()
    assert refused.status_code == 503
    assert refused.json()["error"]["type"] == "overloaded_error"
    assert refused.headers["retry-after"] == "1"
    assert "in flight" in refused.json()["error"]["message"]
    assert other.status_code == 200 and again.status_code == 200
    assert main == 3  # the refused call never reached the provider
    busy = [x for x in lines if x["outcome"] == "refused_concurrency"]
    assert len(busy) == 1 and busy[0]["session"] == "s1" and busy[0]["status"] == 503
    assert "launch_concurrency" in busy[0]["reason"]


def test_a_draining_call_keeps_its_slot(make_stack: MakeStack) -> None:
    turn = {"text": "t", "usage": {"output_tokens": 700}, "pause": {"after_events": 3, "gate": "g"}}
    with make_stack({"turns": [turn]}, launch_concurrency=1) as stack:
        headers = {"x-api-key": stack.issue()}
        url = f"{stack.url}/v1/messages"
        with httpx.stream("POST", url, json=BODY, headers=headers) as r:
            next(r.iter_lines())
        # The client left; the gateway still reads the answer for its usage.
        refused = httpx.post(url, json=BODY, headers=headers)
        stack.provider.gate("g").set()
        assert kit.wait_for(lambda: bool(stack.ledger_rows()))
        assert kit.wait_for(lambda: stack.gateway.slots.in_flight("s1") == 0)
        again = httpx.post(url, json=dict(BODY, stream=False), headers=headers)
        row = stack.ledger_rows()[0]
    assert refused.status_code == 503 and again.status_code == 200
    assert row["output_tokens"] == 700
