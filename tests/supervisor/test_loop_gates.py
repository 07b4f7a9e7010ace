"""The loop's pure decisions: renewal gates, back-off, vendor choice and admission."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentc.core.rules import rfc3339
from agentc.supervisor.loop.gates import (
    Backoff,
    HostState,
    Progress,
    Vendor,
    admission_holds,
    choose_vendor,
    drain_reason,
    progress_age_ms,
)

LIVE = Progress(events_age_seconds=10, progress_age_ms=60_000, elapsed_seconds=300)


def test_a_live_launch_with_recent_progress_is_renewed() -> None:
    assert drain_reason(LIVE, budget_minutes=60) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"events_age_seconds": 900}, "no harness events for 15 minutes (limit 15)"),
        ({"progress_age_ms": 3_600_000}, "no checkpoint for 60 minutes (limit 60)"),
        ({"elapsed_seconds": 3600}, "the launch used its budget of 60 minutes"),
    ],
)
def test_each_gate_drains_at_its_limit_and_names_itself(
    change: dict[str, Any], reason: str
) -> None:
    progress = dataclasses.replace(LIVE, **change)
    assert drain_reason(progress, budget_minutes=60) == reason


def test_just_under_each_limit_renews() -> None:
    edge = Progress(899.9, 3_599_999, 3599.9)
    assert drain_reason(edge, budget_minutes=60) is None


def test_backoff_doubles_caps_and_resets() -> None:
    backoff = Backoff()
    assert [backoff.failure() for _ in range(6)] == [30, 60, 120, 240, 300, 300]
    backoff.success()
    assert backoff.failure() == 30


def test_vendor_choice_skips_limited_and_signed_out_vendors() -> None:
    now = 1_000_000
    primary = Vendor("claude", unusable_until_ms=now + 60_000)
    fallback = Vendor("codex")
    assert choose_vendor([primary, fallback], now) == (fallback, ["claude: rate-limited for 60 s"])
    assert choose_vendor([Vendor("claude", unusable_until_ms=now)], now)[0] == Vendor(
        "claude", unusable_until_ms=now
    )
    chosen, reasons = choose_vendor([primary, Vendor("codex", unusable_reason="signed out")], now)
    assert chosen is None and reasons == ["claude: rate-limited for 60 s", "codex: signed out"]


def test_admission_names_every_problem_together() -> None:
    host = HostState(free_mib=100, kill_switch=True, spent_24h_usd=12.5)
    vendor, holds = admission_holds(
        host, min_free_mib=1024, daily_cap_usd=10.0, vendors=[], now_ms=0
    )
    assert vendor is None
    assert list(holds.values()) == [
        "the kill switch is set",
        "only 100 MiB free (min_free_mib is 1024)",
        "the daily cost cap is reached ($12.50 of $10.00)",
        "no vendor is usable: none configured",
    ]


def test_admission_passes_with_a_usable_vendor() -> None:
    host = HostState(free_mib=4096, kill_switch=False, spent_24h_usd=1.0)
    vendor, holds = admission_holds(
        host, min_free_mib=1024, daily_cap_usd=None, vendors=[Vendor("pi")], now_ms=0
    )
    assert vendor == Vendor("pi") and holds == {}


def test_admission_for_one_more_launch_needs_free_memory() -> None:
    low = HostState(free_mib=4096, kill_switch=False, spent_24h_usd=0.0, free_memory_mib=900)
    vendor, holds = admission_holds(
        low, min_free_mib=1024, daily_cap_usd=None, vendors=[Vendor("pi")], now_ms=0,
        min_free_memory_mib=1024,
    )  # fmt: skip
    assert vendor is None
    assert holds == {"memory": "only 900 MiB of memory available (min_free_memory_mib is 1024)"}
    enough = dataclasses.replace(low, free_memory_mib=1024)
    assert admission_holds(
        enough, min_free_mib=1024, daily_cap_usd=None, vendors=[Vendor("pi")], now_ms=0,
        min_free_memory_mib=1024,
    ) == (Vendor("pi"), {})  # fmt: skip


@pytest.mark.parametrize(
    ("spent", "reserved", "code"),
    [(9.0, 0.0, None), (9.0, 0.99, None), (9.0, 1.0, "cost_reserve"), (10.0, 0.0, "cost_cap")],
)
def test_the_daily_cap_counts_what_running_launches_may_still_spend(
    spent: float, reserved: float, code: str | None
) -> None:
    host = HostState(
        free_mib=4096, kill_switch=False, spent_24h_usd=spent, reserved_usd=reserved, running=2
    )
    vendor, holds = admission_holds(
        host, min_free_mib=0, daily_cap_usd=10.0, vendors=[Vendor("pi")], now_ms=0
    )
    assert list(holds) == ([code] if code else []) and (vendor is None) == bool(code)
    if code == "cost_reserve":
        assert holds[code] == (
            "the daily cost cap may be reached by the 2 running launches "
            "($9.00 spent and $1.00 reserved, of $10.00)"
        )


def test_progress_age_uses_the_service_clock() -> None:
    progress, now = 1_700_000_000_000, 1_700_000_600_000
    view = {
        "expires_at": rfc3339(now + 240_000),
        "lease_remaining_ms": 240_000,
        "last_progress_at": rfc3339(progress),
    }
    assert progress_age_ms(view) == 600_000
    assert progress_age_ms({**view, "last_progress_at": rfc3339(now + 5_000)}) == 0
    assert progress_age_ms({**view, "expires_at": "garbage"}) is None
    assert progress_age_ms({}) is None
