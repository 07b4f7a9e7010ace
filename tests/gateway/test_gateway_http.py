"""The gateway over plain HTTP: pass-through, streaming, refusals, credential injection."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx

from agentc.gateway.sentinels import Grant

MakeStack = Any
TOOLS = [{"name": "Bash", "input_schema": {}}]
BODY = {"model": "claude-sonnet-5", "stream": True, "tools": TOOLS, "messages": []}
REAL_KEY = "sk-ant-REAL-host-only-0123456789abcdef"


def test_a_429_passes_through_unchanged(make_stack: MakeStack) -> None:
    reset = int(time.time()) + 600
    turn = {"failure": {"kind": "rate_limit", "reset_at": reset}}
    with make_stack({"turns": [turn, turn]}) as stack:
        direct = httpx.post(f"{stack.provider.url}/v1/messages", json=BODY)
        key = stack.issue()
        via = httpx.post(f"{stack.url}/v1/messages", json=BODY, headers={"x-api-key": key})
    assert via.status_code == direct.status_code == 429
    assert via.content == direct.content
    # The provider counts retry-after down from each request's own second, so the gateway's
    # answer is compared with what the provider answered to the gateway's request.
    sent = stack.provider.requests[-1].answered_headers
    for name in (
        "retry-after",
        "anthropic-ratelimit-unified-reset",
        "anthropic-ratelimit-requests-reset",
    ):
        assert via.headers[name] == sent[name]
    assert direct.headers["anthropic-ratelimit-unified-reset"] == str(reset)
    assert json.loads(stack.config.vendors.read_text())["exhausted_until"]["claude"] == reset * 1000


def test_the_first_event_arrives_before_the_provider_finishes(make_stack: MakeStack) -> None:
    script = {"turns": [{"text": "slow", "pause": {"after_events": 1, "gate": "g"}}]}
    with make_stack(script) as stack:
        headers = {"x-api-key": stack.issue()}
        with httpx.stream("POST", f"{stack.url}/v1/messages", json=BODY, headers=headers) as r:
            lines = r.iter_lines()
            assert next(lines) == "event: message_start"
            assert stack.provider.paused("g").is_set()
            assert not stack.provider.main_requests()[0].finished.is_set()
            stack.provider.gate("g").set()
            assert "event: message_stop" in list(lines)


def test_unknown_and_missing_sentinels_are_refused_in_the_api_shape(make_stack: MakeStack) -> None:
    with make_stack({"turns": []}) as stack:
        bad = httpx.post(f"{stack.url}/v1/messages", json=BODY, headers={"x-api-key": REAL_KEY})
        none = httpx.post(f"{stack.url}/v1/responses", json=BODY)
        assert stack.provider.requests == []
    assert bad.status_code == 401
    assert bad.json()["error"]["type"] == "authentication_error"
    assert none.status_code == 401 and "error" in none.json() and "type" not in none.json()
    assert REAL_KEY not in stack.log.getvalue()


def test_oauth_credential_and_bearer_sentinel(make_stack: MakeStack, credential: Path) -> None:
    credential.write_text(json.dumps({"oauth_token": "oat-REAL"}))
    os.chmod(credential, 0o600)
    with make_stack({"turns": [{"text": "hi"}]}) as stack:
        token = stack.issue()
        r = httpx.post(
            f"{stack.url}/v1/messages?beta=true",
            json=BODY,
            headers={"authorization": f"Bearer {token}", "anthropic-beta": "claude-code-20250219"},
        )
        seen = stack.provider.requests[0]
    assert r.status_code == 200
    assert seen.headers["authorization"] == "Bearer oat-REAL"
    assert "x-api-key" not in seen.headers
    assert seen.headers["anthropic-beta"] == "claude-code-20250219,oauth-2025-04-20"
    assert seen.query == "beta=true"


def test_client_closing_mid_stream_still_settles(make_stack: MakeStack) -> None:
    script = {
        "turns": [
            {"text": "x", "usage": {"input_tokens": 9}, "pause": {"gate": "g", "after_events": 1}}
        ]
    }
    with make_stack(script) as stack:
        headers = {"x-api-key": stack.issue()}
        with httpx.stream("POST", f"{stack.url}/v1/messages", json=BODY, headers=headers) as r:
            next(r.iter_lines())
        stack.provider.gate("g").set()
        deadline = time.monotonic() + 10
        while not stack.ledger_rows() and time.monotonic() < deadline:
            time.sleep(0.02)
    rows = stack.ledger_rows()
    assert rows and rows[0]["input_tokens"] == 9


def test_a_canary_launch_marks_its_ledger_rows(make_stack: MakeStack) -> None:
    """A dedicated canary project's launch: its grant carries ``canary`` over the control
    socket's wire shape, and every ledger row of its calls says ``canary: true``."""
    grant = Grant(launch_id="c1", attempt="a1", generation=1, upstream="claude", canary=True)
    assert Grant.from_message(grant.message()) == grant
    assert "canary" not in dataclasses.replace(grant, canary=False).message()
    with make_stack({"turns": [{"text": "hi"}, {"text": "hi"}]}) as stack:
        for launch, canary in (("c1", True), ("m1", False)):
            key = stack.issue(launch, canary=canary)
            ok = httpx.post(f"{stack.url}/v1/messages", json=BODY, headers={"x-api-key": key})
            assert ok.status_code == 200
    marks = {row["session"]: row.get("canary") for row in stack.ledger_rows()}
    assert marks == {"c1": True, "m1": None}
