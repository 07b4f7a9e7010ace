from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentc.core.errors import CoordinatorError
from agentc.core.model import ActivityKind, ReviewMode, TaskKind
from agentc.core.rules import (
    check_candidate_ref,
    check_evidence,
    check_idempotency_key,
    find_cycle,
    fingerprint,
    iso_week_start_ms,
    may_review,
    review_activities,
    rfc3339,
)


def test_cycles_are_found_and_reported_as_a_path() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"]}, "a") is None
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}, "a") == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["a"]}, "a") == ["a", "a"]


@given(st.dictionaries(st.sampled_from("abcdef"), st.lists(st.sampled_from("abcdef"))))
def test_cycle_detection_matches_reachability(edges: dict[str, list[str]]) -> None:
    def reaches(src: str, dst: str) -> bool:
        seen, stack = set(), list(edges.get(src, []))
        while stack:
            n = stack.pop()
            if n == dst:
                return True
            if n not in seen:
                seen.add(n)
                stack.extend(edges.get(n, []))
        return False

    for start in "abcdef":
        path = find_cycle(edges, start)
        assert (path is not None) == reaches(start, start)
        if path:
            assert path[0] == path[-1] == start
            assert all(b in edges.get(a, []) for a, b in zip(path, path[1:], strict=False))


def test_evidence_must_name_each_criterion_once() -> None:
    check_evidence(["a", "b"], [("b", "x"), ("a", "y")])
    for bad in (
        [("a", "x")],
        [("a", "x"), ("b", "y"), ("c", "z")],
        [("a", "x"), ("a", "x"), ("b", "y")],
    ):
        with pytest.raises(CoordinatorError) as err:
            check_evidence(["a", "b"], bad)
        assert err.value.code == "evidence_mismatch"


def test_idempotency_keys() -> None:
    assert check_idempotency_key("k" * 128) == "k" * 128
    for bad in (None, "", "k" * 129, "has space", "tab\t"):
        with pytest.raises(CoordinatorError):
            check_idempotency_key(bad)


def test_fingerprint_binds_body_session_and_proof() -> None:
    base = fingerprint("POST /x", {"a": 1, "b": 2}, "s", "p")
    assert base == fingerprint("POST /x", {"b": 2, "a": 1}, "s", "p")
    assert base != fingerprint("POST /x", {"a": 1, "b": 3}, "s", "p")
    assert base != fingerprint("POST /y", {"a": 1, "b": 2}, "s", "p")
    assert base != fingerprint("POST /x", {"a": 1, "b": 2}, "t", "p")
    assert base != fingerprint("POST /x", {"a": 1, "b": 2}, "s", "q")


def test_review_activities_per_mode() -> None:
    assert review_activities(ReviewMode.NONE, TaskKind.GENERAL) == []
    assert review_activities(ReviewMode.NONE, TaskKind.CODE) == [ActivityKind.INTEGRATION]
    assert review_activities(ReviewMode.BOTH, TaskKind.GENERAL) == [
        ActivityKind.AGENT_REVIEW,
        ActivityKind.HUMAN_REVIEW,
    ]
    assert review_activities(ReviewMode.EITHER, TaskKind.CODE) == [
        ActivityKind.EITHER_REVIEW,
        ActivityKind.INTEGRATION,
    ]
    assert may_review("either_review", actor_is_human=False)
    assert may_review("either_review", actor_is_human=True)
    assert not may_review("human_review", actor_is_human=False)
    assert not may_review("agent_review", actor_is_human=True)


def test_candidate_refs() -> None:
    prefix = "refs/agent-coordinator/candidates/"
    assert check_candidate_ref(prefix + "t/s", prefix)
    for bad in (None, prefix, "refs/heads/main", prefix + "a..b", prefix + "a b", prefix + "x/"):
        with pytest.raises(CoordinatorError):
            check_candidate_ref(bad, prefix)


@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_rfc3339_is_the_plain_formatting(ms: int) -> None:
    # (the formatter caches each second's text; this is the uncached way, exact for any time)
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    plain = at.isoformat(timespec="milliseconds")
    assert rfc3339(ms) == plain.replace("+00:00", "Z")
    assert rfc3339(None) is None


def test_times() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert rfc3339(1_789_000_000_123) == "2026-09-10T00:26:40.123Z"
    # 2026-11-18 11:06 is a Wednesday: its ISO week began Monday 2026-11-16 00:00 UTC.
    assert rfc3339(iso_week_start_ms(1_795_000_000_000)) == "2026-11-16T00:00:00.000Z"
    monday = 1_795_000_000_000 - (2 * 86400 + 11 * 3600 + 6 * 60 + 40) * 1000
    assert iso_week_start_ms(monday) == monday
    assert iso_week_start_ms(monday - 1) == monday - 7 * 86400 * 1000


# --- the one id rule of the programs (URL paths, git refs) ---------------------------------


@given(st.text(alphabet="ab.-_/:\n\\ é", max_size=12) | st.from_regex(r"[A-Za-z0-9._-]{1,130}"))
@example("abc\n")
@example("a..b")
@example("a.lock")
@example("a.")
@example(".a")
@example("x" * 129)
def test_a_safe_id_is_one_path_segment_and_one_ref_component(text: str) -> None:
    from agentc.core.errors import ConfigError
    from agentc.core.rules import check_id, is_safe_id

    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    expected = (
        1 <= len(text) <= 128
        and set(text) <= allowed
        and text[0] not in "._-"
        and ".." not in text
        and not text.endswith((".", ".lock"))
    )
    assert is_safe_id(text) is expected
    if expected:
        assert check_id("task", text) == text
    else:
        with pytest.raises(ConfigError, match=r"^task .* is not a safe id \(1-128 of"):
            check_id("task", text)


@pytest.mark.parametrize(
    "value", ["0f8e2c1a-7b3d-4e5f-9a0b-1c2d3e4f5a6b", "a.b", "A_b-c.d", "x" * 128]
)
def test_git_takes_a_safe_id_as_one_ref_component(value: str) -> None:
    import subprocess

    from agentc.core.rules import is_safe_id

    assert is_safe_id(value)
    done = subprocess.run(["git", "check-ref-format", f"refs/x/{value}/y"], check=False)
    assert done.returncode == 0


@given(st.text(max_size=50))
@example("²")
@example("-12")
@example(" 7 ")
@example("1" * 5000)
def test_whole_number_never_raises_and_takes_only_ascii_digits(text: str) -> None:
    from agentc.core.rules import whole_number

    got = whole_number(text)
    body = text.strip()
    digits = body.removeprefix("-")
    if digits and len(digits) <= 40 and all("0" <= c <= "9" for c in digits):
        assert got == int(body)
    else:
        assert got is None
