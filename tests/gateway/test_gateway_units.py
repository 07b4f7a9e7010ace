"""Gateway parts on their own: credentials, prices, meter, vendors, sentinels, ledger, control."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from agentc.core.errors import SupervisorError
from agentc.gateway.cli import command
from agentc.gateway.control import dispatch
from agentc.gateway.credentials import read_credential
from agentc.gateway.errors import CredentialError, SentinelRefused
from agentc.gateway.ledger import Caps, Ledger
from agentc.gateway.meter import Meter, estimate
from agentc.gateway.prices import DEFAULT_PRICES, Tokens, canonical, price_call
from agentc.gateway.routes import ALLOWED, allowed_calls, route_for
from agentc.gateway.sentinels import Grant, SentinelRegistry
from agentc.gateway.vendors import VendorState, reset_from_headers
from agentc.testing import wire
from agentc.testing.gateway import ControlClient
from agentc.testing.script import Turn, Usage

SECRET = "sk-very-secret-value"


def _cred(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "cred"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_credentials_kinds_and_headers(tmp_path: Path) -> None:
    assert read_credential(_cred(tmp_path, SECRET + "\n")).headers("anthropic") == {
        "x-api-key": SECRET
    }
    oauth = read_credential(_cred(tmp_path, json.dumps({"oauth_token": SECRET})))
    assert oauth.headers("anthropic") == {"authorization": f"Bearer {SECRET}"}
    assert SECRET not in repr(oauth)


@pytest.mark.parametrize(
    ("text", "mode", "match"),
    [
        (SECRET, 0o644, "mode 0644"),
        (SECRET, 0o640, "no group or other access"),
        ("", 0o600, "empty"),
        ('{"api_key": "' + SECRET, 0o600, "not valid JSON"),
        (json.dumps({"token": SECRET}), 0o600, "exactly one of"),
        (SECRET + "\nsecond " + SECRET, 0o600, "one line"),
    ],
)
def test_credential_errors_name_the_file_never_its_bytes(
    tmp_path: Path, text: str, mode: int, match: str
) -> None:
    path = _cred(tmp_path, text, mode)
    with pytest.raises(CredentialError, match=match) as info:
        read_credential(path)
    assert str(path) in str(info.value)
    assert SECRET not in str(info.value)
    assert isinstance(info.value, SupervisorError)


def test_credential_symlink_and_missing(tmp_path: Path) -> None:
    real = _cred(tmp_path, SECRET)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(CredentialError, match="cannot open"):
        read_credential(link)
    with pytest.raises(CredentialError, match="does not exist"):
        read_credential(tmp_path / "nope")


def test_prices() -> None:
    assert canonical("claude-haiku-4-5-20251001") == "claude-haiku-4-5"
    assert canonical("claude-opus-5-5[1m]") == "claude-opus-5-5"
    cost = price_call("claude-haiku-4-5-20251001", Tokens(input=1_000_000), DEFAULT_PRICES)
    assert cost.usd == pytest.approx(1.0) and cost.priced_model == "claude-haiku-4-5"
    unknown = price_call("mystery-1", Tokens(input=1_000_000, output=1_000_000), DEFAULT_PRICES)
    assert unknown.usd is None and unknown.unpriced_reason is not None
    assert unknown.usd_for_caps == pytest.approx(4.0 + 20.0)  # the highest rates


@given(st.integers(1, 97), st.sampled_from(["anthropic", "openai"]))
def test_meter_reads_usage_however_the_stream_is_cut(step: int, api: str) -> None:
    usage = Usage(
        input_tokens=11,
        output_tokens=22,
        cache_creation_input_tokens=33,
        cache_read_input_tokens=44,
    )
    turn = Turn(text="hi", usage=usage)
    if api == "anthropic":
        blocks = wire.anthropic_blocks(turn, set(), ["t"])
        events = wire.anthropic_events(turn, "claude-x", "m1", blocks)
    else:
        events = wire.openai_events(turn, "gpt-x", "r1", wire.openai_items(turn, set(), ["1"]))
    data = b"".join(wire.sse_bytes(n, d) for n, d in events)
    meter = Meter(api, streamed=True)  # type: ignore[arg-type]
    for i in range(0, len(data), step):
        meter.feed(data[i : i + step])
    assert meter.finish() == Tokens(input=11, cache_write=33, cache_read=44, output=22)
    assert meter.model in ("claude-x", "gpt-x")


def test_meter_non_streamed_and_no_usage() -> None:
    turn = Turn(text="x", usage=Usage(input_tokens=5, output_tokens=6))
    body = json.dumps(
        wire.anthropic_message(turn, "m", "id", wire.anthropic_blocks(turn, set(), []))
    ).encode()
    meter = Meter("anthropic", streamed=False)
    meter.feed(body[:10])
    meter.feed(body[10:])
    assert meter.finish() == Tokens(input=5, output=6)
    assert Meter("anthropic", streamed=True).finish() is None


def test_reset_headers() -> None:
    now = 1_000_000_000_000
    assert reset_from_headers({"retry-after": "30"}, now) == now + 30_000
    assert reset_from_headers({"x-ratelimit-reset-requests": "6m0s"}, now) == now + 360_000
    both = {"retry-after": "30", "anthropic-ratelimit-unified-reset": str(now // 1000 + 7200)}
    assert reset_from_headers(both, now) == now + 7_200_000
    assert (
        reset_from_headers({"anthropic-ratelimit-tokens-reset": "2001-09-09T01:46:50Z"}, now)
        == now + 10_000
    )
    assert reset_from_headers({}, now) is None


def test_vendors_json(tmp_path: Path) -> None:
    state = VendorState(tmp_path / "vendors.json")
    (tmp_path / "vendors.json").write_text("{broken")
    assert state.mark_exhausted("claude", 500) == 500
    assert state.mark_exhausted("claude", 100) == 500  # never shortened
    state.mark_exhausted("codex", 700)
    data = json.loads((tmp_path / "vendors.json").read_text())
    assert data["exhausted_until"] == {"claude": 500, "codex": 700}
    assert (tmp_path / "vendors.json").stat().st_mode & 0o777 == 0o600


def test_sentinels_fence_and_revoke() -> None:
    reg = SentinelRegistry()
    g1 = reg.issue(Grant("s1", "a1", 1, "claude", task="t"))
    assert reg.check(g1).launch_id == "s1"
    g2 = reg.issue(Grant("s2", "a1", 2, "claude", task="t"))
    with pytest.raises(SentinelRefused, match="superseded"):
        reg.check(g1)
    g3 = reg.issue(Grant("s3", "a2", 1, "claude", task="t"))  # a new attempt of the task
    with pytest.raises(SentinelRefused, match="superseded"):
        reg.check(g2)
    with pytest.raises(SupervisorError, match="older"):
        reg.issue(Grant("s4", "a1", 1, "claude"))
    assert reg.revoke("s3") == 1
    with pytest.raises(SentinelRefused, match="revoked"):
        reg.check(g3)
    with pytest.raises(SentinelRefused, match="unknown"):
        reg.check("agc-sentinel-guess")
    with pytest.raises(SentinelRefused, match="no credential"):
        reg.check(None)
    assert g1 not in json.dumps(reg.status("s1"))


def test_ledger_caps_and_reload(tmp_path: Path) -> None:
    now = [1_000_000.0]
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, clock=lambda: now[0])
    grant = Grant("s1", "a1", 1, "claude", task="t1")
    caps = Caps(launch_usd=5.0, task_usd=3.0, day_usd=10.0)
    assert ledger.over_cap(grant, caps) is None
    ledger.append(
        {
            "at_ms": ledger.now_ms(),
            "session": "s1",
            "task": "t1",
            "role": "impl",
            "usd_for_caps": 3.0,
        }
    )
    assert ledger.over_cap(grant, caps) == ("task", 3.0, 3.0)
    other = Grant("s2", "a2", 1, "claude", task="t2")
    ledger.append(
        {
            "at_ms": ledger.now_ms(),
            "session": "s2",
            "task": "t2",
            "role": "impl",
            "usd_for_caps": 7.0,
        }
    )
    assert ledger.over_cap(other, caps) == ("launch", 7.0, 5.0)
    assert ledger.over_cap(Grant("s3", "a3", 1, "claude"), caps) == ("day", 10.0, 10.0)
    with path.open("a") as fh:
        fh.write('{"torn')
    reloaded = Ledger(path, clock=lambda: now[0])
    assert reloaded.spent(grant) == (3.0, 3.0, 10.0)
    now[0] += 24 * 3600 + 1  # a rolling day later
    assert reloaded.spent(grant)[2] == 0.0
    assert path.stat().st_mode & 0o777 == 0o600


def test_control_socket(tmp_path: Path) -> None:
    import asyncio
    import threading

    from agentc.gateway.control import serve_control

    reg = SentinelRegistry()
    sock = tmp_path / "control.sock"
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(serve_control(reg, sock))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        assert sock.stat().st_mode & 0o777 == 0o600
        client = ControlClient(sock)
        token = client.issue(
            session="s1", attempt="a1", generation=1, upstream="claude", launch_usd=2
        )
        assert reg.check(token).launch_usd == 2.0
        assert client.status("s1")["sentinels"][0]["state"] == "live"
        assert client.revoke("s1") == 1
        with pytest.raises(SupervisorError, match="missing field 'attempt'"):
            client.issue(session="s2")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()
    assert dispatch(reg, {"op": "nope"}) == {"ok": False, "error": "unknown op 'nope'"}


def test_cli_check(tmp_path: Path) -> None:
    cred = _cred(tmp_path, SECRET)
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'control_socket = "{tmp_path}/c.sock"\nledger = "{tmp_path}/l.jsonl"\n'
        f'vendors = "{tmp_path}/v.json"\n[upstreams.claude]\napi = "anthropic"\n'
        f'base_url = "http://127.0.0.1:9"\ncredential_file = "{cred}"\n'
    )
    result = CliRunner().invoke(command, ["--config", str(config), "--check"])
    assert result.exit_code == 0, result.output
    assert "credential ok" in result.output and SECRET not in result.output
    os.chmod(cred, 0o644)
    result = CliRunner().invoke(command, ["--config", str(config), "--check"])
    assert result.exit_code == 2 and "no group or other access" in result.output
    config.write_text(config.read_text() + "typo = 1\n")
    result = CliRunner().invoke(command, ["--config", str(config), "--check"])
    assert "typo" in result.output


@given(st.sampled_from(["GET", "POST", "PUT", "DELETE"]), st.text(max_size=60))
@example("GET", "..")
@example("GET", ".")
@example("GET", "0..")
@example("GET", "a/..")
def test_an_allowed_path_reaches_the_provider_as_itself(method: str, tail: str) -> None:
    for api in ("anthropic", "openai"):
        for path in (f"/v1/{tail}", f"/v1/models/{tail}", f"/v1/messages/{tail}"):
            route = route_for(api, method, path)
            if route is None:
                continue
            exact = {f"{m} {p}" for m, p in ALLOWED[api]}
            # Else one model: a single segment that is not a dot segment ("0.." is a name).
            model = path.removeprefix("/v1/models/")
            assert f"{method} {path}" in exact or (
                method == "GET"
                and path.startswith("/v1/models/")
                and "/" not in model
                and model not in ("", ".", "..")
            )
            # No normalization on the way out turns it into another path.
            assert httpx.URL("https://api.example.com" + path).path == path
            assert route.metered == (path in ("/v1/messages", "/v1/responses"))


def test_the_allowlist_is_the_harnesses_calls() -> None:
    assert allowed_calls("anthropic") == [
        "POST /v1/messages",
        "POST /v1/messages/count_tokens",
        "GET /v1/models",
        "GET /v1/models/{model_id}",
    ]
    assert allowed_calls("openai") == [
        "POST /v1/responses",
        "GET /v1/models",
        "GET /v1/models/{model_id}",
    ]
    assert route_for("anthropic", "GET", "/v1/models/claude-sonnet-5@20260101") is not None
    assert route_for("openai", "POST", "/v1/messages") is None


def test_an_estimate_takes_the_request_limit_and_known_input() -> None:
    body = json.dumps({"model": "m", "max_tokens": 300, "messages": []}).encode()
    seen = Tokens(input=10, cache_read=40, output=1)
    assert estimate("anthropic", seen, body, 1000) == (Tokens(10, 0, 40, 300), "m")
    # No input seen: from the body's size; no (or an absurd) limit: the configured most.
    assert estimate("openai", None, body, 1000) == (Tokens(len(body) // 3, 0, 0, 1000), "m")
    huge = json.dumps({"max_tokens": 10**40}).encode()
    assert estimate("anthropic", None, huge, 1000)[0].output == 1000
    for junk in (b"", b"[1]", b"{", b"\xff", b"[" * 100_000):
        tokens, model = estimate("openai", None, junk, 7)
        assert tokens.output == 7 and tokens.input >= 1 and model is None
