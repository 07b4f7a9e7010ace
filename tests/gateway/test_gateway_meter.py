"""The live meter: the control socket's ``status`` answers what a launch's calls took so far
(issue 30); calls through the real gateway to the scripted provider, read over the real socket."""

from __future__ import annotations

import json
from typing import Any

import httpx

from agentc.gateway.app import Gateway
from agentc.supervisor.loop.costs import launch_rows
from agentc.testing.gateway import ControlClient, ThreadedGateway

MakeStack = Any
TOOLS = [{"name": "Bash", "input_schema": {}}]
BODY = {"model": "claude-sonnet-5", "max_tokens": 4096, "stream": True, "tools": TOOLS}
# One call at claude-sonnet-5's prices ($2 / $10 / $2.50 / $0.20 per million):
# 1000 in $0.002, 100 out $0.001, 2000 cache write $0.005, 4000 cache read $0.0008.
USAGE = {
    "input_tokens": 1000,
    "output_tokens": 100,
    "cache_creation_input_tokens": 2000,
    "cache_read_input_tokens": 4000,
}
NOTHING = {
    "calls": 0,
    "input_tokens": 0,
    "cache_write_tokens": 0,
    "cache_read_tokens": 0,
    "output_tokens": 0,
    "usd": 0.0,
}


def _post(url: str, key: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"x-api-key": key, "content-type": "application/json"}
    return httpx.post(f"{url}/v1/messages", content=json.dumps(body), headers=headers, timeout=30)


def _issue(control: ControlClient, launch_id: str, **fields: Any) -> str:
    return control.issue(session=launch_id, attempt=f"a-{launch_id}", generation=1,
                         upstream="claude", **fields)  # fmt: skip


def test_status_sums_the_calls_and_a_call_refused_by_the_cap_adds_nothing(
    make_stack: MakeStack,
) -> None:
    script = {"turns": [{"text": "ok", "usage": USAGE, "repeat": 3}]}
    with make_stack(script) as stack:
        stack.server.stop()
        with ThreadedGateway(stack.gateway, control=True) as server:
            control = ControlClient(stack.config.control_socket)
            key = _issue(control, "s1", launch_usd=0.015)
            other = _issue(control, "s2")
            before = control.status("s1")["usage"]
            codes = [_post(server.url, key, BODY).status_code for _ in range(2)]
            two = control.status("s1")["usage"]
            refused = _post(server.url, key, BODY)  # $0.0176 spent: the $0.015 cap is reached
            after = control.status("s1")
            assert _post(server.url, other, BODY).status_code == 200
            others = control.status("s2")["usage"]
            unknown = control.status("never-issued")["usage"]
        forwarded = len(stack.provider.requests)
    assert before == NOTHING == unknown
    assert codes == [200, 200] and refused.status_code == 402 and forwarded == 3
    assert two == {
        "calls": 2,
        "input_tokens": 2000,
        "cache_write_tokens": 4000,
        "cache_read_tokens": 8000,
        "output_tokens": 200,
        "usd": 0.0176,
    }
    # The refused call is in the ledger (its row names the cap) with no tokens and no dollars:
    # it adds a call, and nothing to what the launch took.
    assert after["cap"] == "launch"
    assert after["usage"] == {**two, "calls": 3}
    assert others == {**two, "calls": 1, "input_tokens": 1000, "cache_write_tokens": 2000,
                      "cache_read_tokens": 4000, "output_tokens": 100, "usd": 0.0088}  # fmt: skip
    # One rule: the cost row the supervisor reports once the launch ended carries these sums.
    rows = {row["session_id"]: row for row in launch_rows(stack.config.ledger, set(), "p1")}
    assert {k: rows["s1"][k] for k in NOTHING} == after["usage"]
    assert {k: rows["s2"][k] for k in NOTHING} == others
    # A gateway started again reads the same sums from its ledger.
    assert Gateway(stack.config).ledger.usage("s1") == after["usage"]


def test_a_call_without_a_price_makes_the_dollars_null_for_good(make_stack: MakeStack) -> None:
    script = {
        "turns": [
            {"text": "ok", "usage": USAGE},
            {"text": "ok", "usage": USAGE, "model": "claude-unreleased-9"},
            {"text": "ok", "usage": USAGE},
        ]
    }
    with make_stack(script) as stack:
        stack.server.stop()
        with ThreadedGateway(stack.gateway, control=True) as server:
            control = ControlClient(stack.config.control_socket)
            key = _issue(control, "s1")
            seen = []
            for _ in range(3):
                assert _post(server.url, key, BODY).status_code == 200
                seen.append(control.status("s1")["usage"])
    assert [u["usd"] for u in seen] == [0.0088, None, None]
    assert [u["calls"] for u in seen] == [1, 2, 3]
    assert seen[-1]["input_tokens"] == 3000 and seen[-1]["output_tokens"] == 300
    rows = stack.ledger_rows()
    assert rows[1]["usd"] is None and rows[1]["usd_unpriced_reason"]
    assert rows[1]["usd_for_caps"] > 0  # the cap still counts it, at the highest rates
