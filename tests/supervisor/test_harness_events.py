"""The harness event-stream reader against real recorded streams of Claude Code, Codex and Pi."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentc.gateway.prices import DEFAULT_PRICES, Price, Tokens, dollars, lookup
from agentc.supervisor.harness.events import RunSummary, StreamReader, Usage, summarize


def price_usage(fresh: int, cached: int, output: int, price: Price) -> float:
    """What an estimate charges: fresh input at the input rate, cached at the cache-read rate."""
    tokens = Tokens(input=fresh, cache_read=cached, output=output)
    return round(dollars(tokens, price), 6)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harness-events"


def read(harness: str, name: str) -> bytes:
    return (FIXTURES / harness / name).read_bytes()


def summary_of(harness: str, name: str, **kwargs: object) -> RunSummary:
    return summarize(harness, read(harness, name), **kwargs)  # type: ignore[arg-type]


def test_claude_success_takes_the_result_totals_and_dollars() -> None:
    s = summary_of("claude", "success-tool-use-partial-msgs_cc-2.1.224.awsf.jsonl")
    assert s.completed and not s.failed and not s.rate_limited
    # input = input_tokens + cache_creation_input_tokens; cached = cache_read_input_tokens
    assert s.usage == Usage(5553, 18021, 52)
    assert s.usd == pytest.approx(0.0400983) and not s.usd_estimated
    assert s.final_text == "3" and s.model == "claude-sonnet-5"
    assert s.harness_session is not None


def test_claude_write_tool_run() -> None:
    s = summary_of("claude", "success-tool-use-write_cc-1.0.x.guess-claude_code.jsonl")
    assert s.completed and not s.failed
    assert s.usage == Usage(1505, 53005, 124)
    assert (s.final_text or "").startswith("Done. Created test.txt")


def test_claude_killed_mid_line_is_incomplete_and_priced_from_the_table() -> None:
    s = summary_of("claude", "killed-mid-line-prefix_cc-2.1.224.awsf.jsonl")
    assert not s.completed and not s.failed
    assert s.events == 9  # the partial tenth line is ignored
    # assistant usages deduplicated by message.id (one call, several content blocks)
    assert s.usage == Usage(5481, 6271, 17)
    expected = price_usage(5481, 6271, 17, DEFAULT_PRICES["claude-sonnet-5"])
    assert s.usd == expected and s.usd_estimated


def test_claude_structured_output_is_read_from_the_last_result() -> None:
    s = summary_of("claude", "structured-output-json-schema_cc-2.1.270.calipso.jsonl")
    assert s.structured_output == {"estado": "hola"}
    assert json.loads(s.final_text or "") == {"estado": "hola"}


def test_claude_max_turns_is_a_failure_although_is_error_is_false() -> None:
    s = summary_of("claude", "error-max-turns_cc-2.1.70.guess-claude_code.jsonl")
    assert s.completed and s.failed and s.error == "error_max_turns"
    assert not s.rate_limited


def test_claude_rejected_rate_limit_event_gives_the_reset() -> None:
    s = summary_of("claude", "rate-limit-rejected-429-oauth-mock_cc-2.1.289.timschreiber.jsonl")
    assert s.failed and s.rate_limited and s.reset_ms == 1791179511 * 1000
    assert s.usd == 0.0 and not s.usd_estimated


def test_claude_old_usage_limit_reset_from_the_epoch_suffix() -> None:
    s = summary_of("claude", "usage-limit-result-epoch_cc-1.0.x.vrooli.jsonl")
    assert s.failed and s.rate_limited and s.reset_ms == 1755806400 * 1000


def test_codex_resumed_thread_counts_its_running_total_once() -> None:
    s = summary_of("codex", "multi-run-resume-usage_cx-0.157.1.untether.jsonl")
    # the last turn.completed is the thread's total: 32017 input of which 21760 cached
    assert s.usage == Usage(32017 - 21760, 21760, 21)
    assert s.final_text == "Hi once more!" and s.completed and not s.failed


def test_codex_has_no_dollars_unless_the_model_is_priced() -> None:
    name = "success-command-execution_cx-0.46.0.agentcmd.jsonl"
    unpriced = summary_of("codex", name)
    assert unpriced.usd is None and unpriced.unpriced_reason == "no price for model unknown"
    prices = {"gpt-5-codex": Price(input=1.25, output=10.0, cache_write=1.25, cache_read=0.125)}
    priced = summary_of("codex", name, model="gpt-5-codex", prices=prices)
    assert priced.usd == price_usage(1048, 4992, 129, prices["gpt-5-codex"])
    assert priced.usd_estimated and priced.model == "gpt-5-codex"


def test_codex_usage_limit_and_a_plain_400() -> None:
    limit = summary_of("codex", "usage-limit-turn-failed_cx-gpt-5.hive-mind.jsonl")
    assert limit.failed and limit.rate_limited and limit.reset_ms is None
    bad = summary_of("codex", "turn-failed-400-invalid-request_cx-gpt-5.5.untether.jsonl")
    assert bad.failed and not bad.rate_limited and "invalid_request_error" in (bad.error or "")


def test_codex_comment_lines_and_duplicate_keys_are_tolerated() -> None:
    s = summary_of("codex", "success-web-search-usage-v2_cx-0.157.1.untether.jsonl")
    assert s.completed and s.usage.output_tokens == 178


def test_pi_sums_assistant_messages_and_its_catalog_cost_is_an_estimate() -> None:
    s = summary_of("pi", "success-tool-use-two-turns_pi-0.81.1.awsf.jsonl")
    assert s.usage == Usage(985 + 1018, 0, 14 + 5)
    assert s.usd == pytest.approx(0.010585) and s.usd_estimated
    assert s.final_text == "3" and s.completed and s.model == "gpt-5.6-sol"


def test_pi_killed_is_incomplete() -> None:
    s = summary_of("pi", "killed-mid-line-prefix_pi-0.81.1.awsf.jsonl")
    assert not s.completed and s.events == 10


def test_feeding_byte_by_byte_equals_feeding_whole() -> None:
    data = read("claude", "success-tool-use-partial-msgs_cc-2.1.224.awsf.jsonl")
    reader = StreamReader("claude")
    for i in range(len(data)):
        reader.feed(data[i : i + 1])
    assert reader.summary() == summarize("claude", data)


@pytest.mark.parametrize(
    "line",
    [b"", b"   ", b"# comment", b"not json", b"[1,2]", b'"text"', b"\xff\xfe", b'{"type": 5}'],
)
def test_garbage_lines_are_skipped(line: bytes) -> None:
    s = summarize("claude", line + b"\n" + b'{"type":"result","usage":{"output_tokens":3}}\n')
    assert s.completed and s.usage == Usage(0, 0, 3)


def test_hostile_numbers_never_count() -> None:
    stream = (
        b'{"type":"result","total_cost_usd":-5,"usage":{"input_tokens":-1,'
        b'"output_tokens":true,"cache_read_input_tokens":1e400}}\n'
    )
    s = summarize("claude", stream)
    assert s.usage == Usage(0, 0, 0) and s.usd == 0.0


def test_unknown_harness_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown harness 'gemini'"):
        StreamReader("gemini")


def test_one_price_table_and_lookup_for_the_gateway_and_the_streams() -> None:
    """A stream's estimate uses the gateway's own table and lookup (dated ids by their base)."""
    assert lookup("claude-haiku-4-5-20251001", DEFAULT_PRICES) == (
        "claude-haiku-4-5", DEFAULT_PRICES["claude-haiku-4-5"]
    )  # fmt: skip
    assert lookup("gemini-3", DEFAULT_PRICES) is None
    assert price_usage(1_000_000, 0, 1_000_000, DEFAULT_PRICES["claude-haiku-4-5"]) == 6.0
