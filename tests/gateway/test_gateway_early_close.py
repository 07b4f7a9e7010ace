"""A client that leaves before the last event is still charged its output (issue 14, item 2).

The output count arrives in the stream's last usage event. The gateway keeps reading the
answer after the client left (bounded by ``drain_timeout_s`` and ``drain_max_bytes``); when the
final usage cannot be had it charges the request's ``max_tokens``, marked estimated.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.gateway import kit

MakeStack = Any
TOOLS = [{"name": "Bash", "input_schema": {}}]
MAX_TOKENS = 4096
BODY = {
    "model": "claude-sonnet-5",
    "stream": True,
    "max_tokens": MAX_TOKENS,
    "tools": TOOLS,
    "messages": [{"role": "user", "content": "go"}],
}
USAGE = {"input_tokens": 900, "cache_read_input_tokens": 5000, "output_tokens": 32000}
# message_start, content_block_start, content_block_delta (the text): then the pause.
AFTER_TEXT = 3


def _turn(**pause: Any) -> dict[str, Any]:
    return {
        "text": "the whole answer",
        "usage": USAGE,
        "pause": {"after_events": AFTER_TEXT, **pause},
    }


def _read_text_and_close(url: str, key: str, body: dict[str, Any] = BODY) -> list[str]:
    """Read up to the text delta, then close the connection."""
    with httpx.stream("POST", f"{url}/v1/messages", json=body, headers={"x-api-key": key}) as r:
        lines = []
        for line in r.iter_lines():
            lines.append(line)
            if "text_delta" in line:
                break
    return lines


def _settled(stack: Any) -> dict[str, Any]:
    """The request's one ledger row, once its log line is written too (the gateway writes the
    ledger first)."""
    assert kit.wait_for(lambda: bool(stack.ledger_rows())), "no ledger row"
    assert kit.wait_for(lambda: bool(stack.log_lines())), "no log line"
    rows = stack.ledger_rows()
    assert len(rows) == 1
    return dict(rows[0])


def test_closing_after_the_text_is_charged_the_final_output(make_stack: MakeStack) -> None:
    with make_stack({"turns": [_turn(gate="g")]}) as stack:
        lines = _read_text_and_close(stack.url, stack.issue())
        assert any("the whole answer" in line for line in lines)
        # Give the gateway time to see the client leave before the answer goes on: a gateway
        # that drops the upstream when its client leaves has cut the provider's stream by then.
        upstream = stack.provider.main_requests()[0]
        cut = upstream.finished.wait(1.0)
        stack.provider.gate("g").set()
        row = _settled(stack)
        lines = stack.log_lines()
    assert not cut
    assert row["output_tokens"] == 32000
    assert (row["input_tokens"], row["cache_read_tokens"]) == (900, 5000)
    assert "estimated" not in row
    assert row["usd"] == pytest.approx((900 * 2 + 5000 * 0.2 + 32000 * 10) / 1e6)
    assert [(x["outcome"], x["output_tokens"]) for x in lines] == [("client_closed", 32000)]


def test_no_final_usage_in_time_charges_max_tokens(make_stack: MakeStack) -> None:
    # The provider never finishes (its gate stays shut): the drain gives up after its deadline.
    with make_stack({"turns": [_turn(gate="never")]}, drain_timeout_s=0.3) as stack:
        _read_text_and_close(stack.url, stack.issue())
        row = _settled(stack)
        line = stack.log_lines()[0]
    assert row["estimated"] is True
    assert row["output_tokens"] == MAX_TOKENS
    # The input figures message_start gave are kept.
    assert (row["input_tokens"], row["cache_read_tokens"]) == (900, 5000)
    assert row["usd"] == pytest.approx((900 * 2 + 5000 * 0.2 + MAX_TOKENS * 10) / 1e6)
    assert line["estimated"] is True and line["outcome"] == "client_closed"
    assert "drain_timeout_s" in line["reason"] and "max_tokens" in line["reason"]


def test_the_drain_stops_after_drain_max_bytes(make_stack: MakeStack) -> None:
    turn = _turn(gate="g")
    turn["text"] = "x" * 200_000  # the rest of the answer: far more than the drain may read
    turn["pause"]["after_events"] = 2  # before the text
    body = dict(BODY, max_tokens=10**9)  # beyond any estimate: capped at estimate_output_tokens
    config = {"drain_max_bytes": 1024, "estimate_output_tokens": 20000}
    with make_stack({"turns": [turn]}, **config) as stack:
        key = stack.issue()
        with httpx.stream(
            "POST", f"{stack.url}/v1/messages", json=body, headers={"x-api-key": key}
        ) as r:
            assert next(r.iter_lines()) == "event: message_start"
        stack.provider.main_requests()[0].finished.wait(1.0)
        stack.provider.gate("g").set()
        row = _settled(stack)
        line = stack.log_lines()[0]
    assert row["estimated"] is True and row["output_tokens"] == 20000
    assert "drain_max_bytes" in line["reason"]


def test_codex_closing_early_is_charged_the_final_usage(make_stack: MakeStack) -> None:
    usage = {"input_tokens": 300, "cache_read_input_tokens": 700, "output_tokens": 12000}
    turn = {"text": "hello", "usage": usage, "pause": {"after_events": 2, "gate": "g"}}
    body = {
        "model": "gpt-5",
        "stream": True,
        "tools": [{"type": "function", "name": "x"}],
        "input": [],
    }
    with make_stack({"turns": [turn]}) as stack:
        key = stack.issue(upstream="codex")
        headers = {"authorization": f"Bearer {key}"}
        with httpx.stream("POST", f"{stack.url}/v1/responses", json=body, headers=headers) as r:
            assert next(r.iter_lines()).startswith("event: response.")
        cut = stack.provider.main_requests()[0].finished.wait(1.0)
        stack.provider.gate("g").set()
        row = _settled(stack)
    assert not cut
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (
        300,
        700,
        12000,
    )
    assert row["model"] == "gpt-5" and "estimated" not in row


def test_codex_without_any_usage_is_estimated_from_the_request(make_stack: MakeStack) -> None:
    turn = {"text": "hello", "pause": {"after_events": 2, "gate": "never"}}
    prompt = "y" * 30_000
    body = {
        "model": "gpt-5",
        "stream": True,
        "tools": [{"type": "function", "name": "x"}],
        "input": [{"role": "user", "content": prompt}],
    }
    config = {"drain_timeout_s": 0.3, "estimate_output_tokens": 50_000}
    with make_stack({"turns": [turn]}, **config) as stack:
        key = stack.issue(upstream="codex")
        headers = {"authorization": f"Bearer {key}"}
        with httpx.stream("POST", f"{stack.url}/v1/responses", json=body, headers=headers) as r:
            next(r.iter_lines())
        row = _settled(stack)
    # No max_output_tokens in the request: estimate_output_tokens; the input from the body.
    assert row["estimated"] is True and row["output_tokens"] == 50_000
    assert row["input_tokens"] >= len(prompt) // 3
    assert row["model"] == "gpt-5" and row["usd"] > 0.5


def test_a_stream_that_ends_without_its_final_usage_is_estimated(make_stack: MakeStack) -> None:
    # The provider's stream stops after message_start (a malformed event, then the end).
    with make_stack({"turns": [{"failure": {"kind": "malformed"}}]}) as stack:
        key = stack.issue()
        r = httpx.post(f"{stack.url}/v1/messages", json=BODY, headers={"x-api-key": key})
        row = _settled(stack)
    assert r.status_code == 200
    assert row["estimated"] is True and row["output_tokens"] == MAX_TOKENS


def test_a_full_read_is_metered_exactly_and_not_estimated(make_stack: MakeStack) -> None:
    with make_stack({"turns": [{"text": "hi", "usage": USAGE}]}) as stack:
        key = stack.issue()
        r = httpx.post(f"{stack.url}/v1/messages", json=BODY, headers={"x-api-key": key})
        json_answer = httpx.post(
            f"{stack.url}/v1/messages", json=dict(BODY, stream=False), headers={"x-api-key": key}
        )
        # A JSON answer's client has every byte before the gateway sees the upstream's end.
        assert kit.wait_for(lambda: len(stack.ledger_rows()) == 2)
        rows = stack.ledger_rows()
    assert r.status_code == json_answer.status_code == 200
    assert rows[0]["output_tokens"] == 32000 and "estimated" not in rows[0]
    assert rows[1]["output_tokens"] == 5 and "estimated" not in rows[1]  # the "after" turn


def test_a_drain_cut_by_the_gateway_stopping_is_settled(make_stack: MakeStack) -> None:
    with make_stack({"turns": [_turn(gate="never")]}, drain_timeout_s=600) as stack:
        _read_text_and_close(stack.url, stack.issue())
        assert not stack.provider.main_requests()[0].finished.wait(0.5)
        assert stack.ledger_rows() == []
        stack.server.stop()  # the gateway stops while the answer is still being read
        row = _settled(stack)
        line = stack.log_lines()[0]
    assert row["estimated"] is True and row["output_tokens"] == MAX_TOKENS
    assert "the gateway stopped" in line["reason"]
