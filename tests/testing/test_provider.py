"""The scripted provider over plain HTTP: wire shapes, side requests, failures, the script."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentc.core.errors import ConfigError
from agentc.testing.provider import ScriptedProvider
from agentc.testing.script import load_script, parse_script

TOOLS = [{"name": "Bash", "input_schema": {}}, {"name": "Write", "input_schema": {}}]


def _events(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for chunk in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines.get("event", ""), json.loads(lines["data"])))
    return out


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    script = parse_script(
        {
            "turns": [
                {
                    "text": "working",
                    "tool_calls": [{"tool": "run", "command": "ls"}],
                    "usage": {
                        "input_tokens": 7,
                        "output_tokens": 3,
                        "cache_read_input_tokens": 100,
                        "cache_creation_input_tokens": 20,
                    },
                },
                {"failure": {"kind": "rate_limit", "retry_after_s": 30}},
                {"failure": {"kind": "usage_limit", "reset_at": 1900000000}},
                {"failure": {"kind": "malformed"}},
                {"failure": {"kind": "server_error", "status": 529}},
            ]
        }
    )
    with ScriptedProvider(script) as p:
        yield p


def test_anthropic_stream_text_and_tool_use(provider: ScriptedProvider) -> None:
    body = {"model": "claude-x", "stream": True, "tools": TOOLS, "messages": []}
    r = httpx.post(f"{provider.url}/v1/messages?beta=true", json=body)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    names = [n for n, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    start = events[0][1]["message"]
    assert start["model"] == "claude-x"
    assert start["usage"]["cache_read_input_tokens"] == 100
    tool = [
        d
        for n, d in events
        if n == "content_block_start" and d["content_block"]["type"] == "tool_use"
    ]
    assert tool[0]["content_block"]["name"] == "Bash"
    delta = [d for n, d in events if n == "message_delta"][0]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["output_tokens"] == 3
    rec = provider.main_requests()[0]
    assert rec.query == "beta=true" and rec.turn == 0
    assert rec.reported is not None and rec.reported.input_tokens == 7


def test_side_requests_do_not_consume_turns(provider: ScriptedProvider) -> None:
    r = httpx.post(f"{provider.url}/v1/messages", json={"model": "haiku", "messages": []})
    assert r.status_code == 200
    assert r.json()["content"] == [{"type": "text", "text": "OK"}]
    assert provider.main_requests() == []
    assert provider.requests[0].main is False


def test_count_tokens_and_models_do_not_play_the_script(provider: ScriptedProvider) -> None:
    body = {"model": "m", "tools": TOOLS, "messages": [{"role": "user", "content": "x" * 400}]}
    counted = httpx.post(f"{provider.url}/v1/messages/count_tokens", json=body)
    assert counted.status_code == 200
    assert counted.json()["input_tokens"] >= 100
    anthropic = {"anthropic-version": "2023-06-01"}
    listed = httpx.get(f"{provider.url}/v1/models", headers=anthropic).json()
    assert [m["id"] for m in listed["data"]][:1] == ["claude-sonnet-5"]
    assert listed["has_more"] is False
    one = httpx.get(f"{provider.url}/v1/models/gpt-5")
    assert one.json() == {
        "id": "gpt-5",
        "object": "model",
        "created": 1767225600,
        "owned_by": "scripted",
    }
    missing = httpx.get(f"{provider.url}/v1/models/nope", headers=anthropic)
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    assert provider.main_requests() == []
    assert [r.status for r in provider.requests] == [200, 200, 200, 404]
    # The first scripted turn is still the next one.
    first = httpx.post(f"{provider.url}/v1/messages", json=dict(body, stream=False))
    assert first.json()["content"][0]["text"] == "working"


def test_scripted_failures(provider: ScriptedProvider) -> None:
    body = {"model": "m", "stream": True, "tools": TOOLS, "messages": []}
    url = f"{provider.url}/v1/messages"
    httpx.post(url, json=body)
    limited = httpx.post(url, json=body)
    assert limited.status_code == 429
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert 25 <= int(limited.headers["retry-after"]) <= 30
    assert int(limited.headers["anthropic-ratelimit-unified-reset"]) > time.time()
    usage = httpx.post(url, json=body)
    assert usage.status_code == 429
    assert usage.json()["error"]["message"] == "Claude AI usage limit reached|1900000000"
    bad = httpx.post(url, json=body)
    assert bad.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        _events(bad.text)
    overloaded = httpx.post(url, json=body)
    assert overloaded.status_code == 529
    # After the script: the "after" turn.
    done = httpx.post(url, json=dict(body, stream=False))
    assert done.json()["content"][0]["text"] == "Done."
    assert [r.status for r in provider.main_requests()] == [200, 429, 429, 200, 529, 200]


def test_openai_responses_function_call() -> None:
    script = parse_script(
        {
            "turns": [
                {"tool_calls": [{"tool": "write", "path": "/tmp/x y/f.txt", "content": "it's"}]}
            ]
        }
    )
    tools = [{"type": "function", "name": "exec_command", "parameters": {}}]
    with ScriptedProvider(script) as p:
        r = httpx.post(
            f"{p.url}/v1/responses",
            json={"model": "gpt-5", "stream": True, "tools": tools, "input": []},
        )
        after = httpx.post(
            f"{p.url}/v1/responses",
            json={"model": "gpt-5", "stream": False, "tools": tools, "input": []},
        )
    events = _events(r.text)
    assert [n for n, _ in events][0] == "response.created"
    done = [d for n, d in events if n == "response.output_item.done"]
    call = done[-1]["item"]
    assert call["type"] == "function_call" and call["name"] == "exec_command"
    cmd = json.loads(call["arguments"])["cmd"]
    assert subprocess.run(["bash", "-n", "-c", cmd], check=False).returncode == 0
    assert "'/tmp/x y/f.txt'" in cmd
    completed = events[-1][1]["response"]
    assert completed["usage"]["input_tokens"] == 10
    assert after.json()["output"][0]["content"][0]["text"] == "Done."


def test_pause_holds_the_stream_until_the_gate_opens() -> None:
    script = parse_script({"turns": [{"text": "slow", "pause": {"after_events": 1, "gate": "g"}}]})
    body = {"model": "m", "stream": True, "tools": TOOLS, "messages": []}
    with (
        ScriptedProvider(script) as p,
        httpx.stream("POST", f"{p.url}/v1/messages", json=body) as r,
    ):
        lines = r.iter_lines()
        assert next(lines) == "event: message_start"
        assert p.paused("g").wait(10)
        rec = p.main_requests()[0]
        assert not rec.finished.is_set()
        p.gate("g").set()
        rest = list(lines)
        assert "event: message_stop" in rest
        assert rec.finished.wait(10)


def test_script_validation_is_strict(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"turns\.0\.txet"):
        parse_script({"turns": [{"txet": "typo"}]})
    with pytest.raises(ConfigError, match="tool"):
        parse_script({"turns": [{"tool_calls": [{"tool": "delete", "path": "x"}]}]})
    bad = tmp_path / "s.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        load_script(bad)
    assert parse_script({"turns": [{"text": "a", "repeat": 3}]}).expanded()[2].text == "a"


def test_command_line(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"text": "from the cli"}]}))
    record = tmp_path / "rec.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentc.testing.provider",
            "--script",
            str(script),
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        r = httpx.post(f"{url}/v1/messages", json={"model": "m", "tools": TOOLS, "messages": []})
        assert r.json()["content"][0]["text"] == "from the cli"
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert json.loads(record.read_text().splitlines()[0])["main"] is True
