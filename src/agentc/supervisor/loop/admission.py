"""Measuring the host for admission (free disk, kill switch, spend, vendors); the decision itself
is :func:`agentc.supervisor.loop.gates.admission_holds`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from agentc.core.quiet import outside_reason
from agentc.core.roles import role_slug
from agentc.gateway.ledger import read_rows
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.harness.command import PREFIX as COMMAND_PREFIX
from agentc.supervisor.loop import signin, slots
from agentc.supervisor.loop.gates import HostState, Vendor, admission_holds, choose_vendor, unusable
from agentc.supervisor.loop.records import HARNESS_LEDGER, now_ms

DAY_MS = 24 * 3600 * 1000


def paths(config: SupervisorConfig) -> tuple[Path, Path, Path]:
    """The kill switch, the gateway's ledger and its vendor state."""
    state = config.resolved_state_dir()
    health = config.health
    return (
        health.kill_switch or state / "kill-switch",
        health.ledger or state / "gateway/ledger.jsonl",
        health.vendors or state / "vendors.json",
    )


def kill_switch_set(path: Path) -> bool:
    """Anything at the path, checked without following links; any error but not-found is set."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def free_mib(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize // (1024 * 1024)


def spent_24h(ledger: Path, role_slug: str, now: int) -> float:
    """Dollars the ledger records for the role in the last 24 hours (unreadable: nothing)."""
    return spending(ledger, role_slug, now)[0]


def spending(
    ledger: Path, role_slug: str, now: int, sessions: Collection[str] = ()
) -> tuple[float, dict[str, float]]:
    """Dollars the ledger records for the role in the last 24 hours, and for each of
    ``sessions`` (launch ids) in all (unreadable: nothing)."""
    total, each = 0.0, dict.fromkeys(sessions, 0.0)
    try:
        for row in read_rows(ledger):
            if row.get("role") != role_slug:
                continue
            usd, at = row.get("usd_for_caps", row.get("usd")), row.get("at_ms")
            if not isinstance(usd, int | float):
                continue
            if isinstance(at, int) and at >= now - DAY_MS:
                total += float(usd)
            session = row.get("session")
            if isinstance(session, str) and session in each:
                each[session] += float(usd)
    except OSError:
        return 0.0, dict.fromkeys(sessions, 0.0)
    return total, each


class Running(NamedTuple):
    """A launch running now, as admission counts it: its id and its harness."""

    launch_id: str
    harness: str


def reserved(
    config: SupervisorConfig, running: Sequence[Running], spent: dict[str, float]
) -> float:
    """What the running launches may still spend: ``[health] launch_reserve_usd`` each, less
    what the ledger has of it already; a ``command:`` agent spends nothing through a model."""
    per_launch = config.health.launch_reserve_usd
    return sum(
        max(0.0, per_launch - spent.get(launch.launch_id, 0.0))
        for launch in running
        if not launch.harness.startswith(COMMAND_PREFIX)
    )


def choices(config: SupervisorConfig, role: str) -> list[dict[str, str]]:
    """The vendors ``role`` may launch with, in order: the implementer's primary and fallback
    (``[health.fallback]``), or the reviewer's one."""
    run, fallback = config.run, config.health.fallback
    if role == "reviewer":
        return [{"harness": run.reviewer_harness, "model": run.reviewer_model}]
    wanted = [{"harness": run.harness, "model": run.model, "effort": run.effort}]
    if fallback is not None:
        wanted.append(
            {"harness": fallback.harness, "model": fallback.model, "effort": fallback.effort}
        )
    return wanted


def vendors(
    config: SupervisorConfig, state_file: Path, role: str = "implementer"
) -> list[tuple[Vendor, dict[str, str]]]:
    """The role's vendors with their exhaustion from the gateway's state and whether they can
    sign in (:mod:`agentc.supervisor.loop.signin`): the implementer's primary and fallback, or
    the reviewer's one."""
    try:
        data = json.loads(state_file.read_text(encoding="utf-8"))
        until = data.get("exhausted_until") if isinstance(data, dict) else None
    except (OSError, ValueError):
        until = None
    until = until if isinstance(until, dict) else {}
    wanted = choices(config, role)
    result = []
    now, found = now_ms(), False
    for choice in wanted:
        harness = choice["harness"]
        upstream = None
        if not harness.startswith(COMMAND_PREFIX):
            upstream = config.gateway_upstreams.get(harness, harness)
        mark = until.get(upstream) if upstream else None
        exhausted = mark if isinstance(mark, int) else None
        # Signed in? Checked in order, only until a usable vendor is found (the rest unused).
        reason = None
        if not found and (exhausted is None or exhausted <= now):
            reason = signin.vendor_problem(config, harness, role)
            found = reason is None
        result.append((Vendor(harness, exhausted, reason), choice))
    return result


class Admission(NamedTuple):
    """What admission found: the vendor to claim with (None: hold), every hold by its code
    (:func:`.gates.admission_holds`) and the vendors unusable now (:func:`.gates.unusable`)."""

    choice: dict[str, str] | None
    holds: dict[str, str]
    unusable: list[dict[str, object]]


def measure(
    config: SupervisorConfig, role: str = "implementer", running: Sequence[Running] = ()
) -> Admission:
    """Admission for one more launch of ``role``: the kill switch, ``[health] quiet_hours``,
    free disk and memory, and its own daily cap (``implementer_daily_usd`` or
    ``reviewer_daily_usd``) with what the role's ``running`` launches may still spend."""
    kill, ledger, vendor_file = paths(config)
    now = now_ms()
    state = config.resolved_state_dir()
    health = config.health
    ids = [launch.launch_id for launch in running]
    # The gateway's ledger and the rows of launches costed from their own events.
    day, each = spending(ledger, role_slug(role), now, ids)
    day += spent_24h(state / "loop" / HARNESS_LEDGER, role_slug(role), now)
    host = HostState(
        free_mib=free_mib(state),
        kill_switch=kill_switch_set(kill),
        spent_24h_usd=day,
        quiet=outside_reason(health.quiet_hours, datetime.now()),
        free_memory_mib=slots.memory_mib(key="MemAvailable"),
        reserved_usd=reserved(config, running, each),
        running=len(running),
    )
    cap = (
        health.reviewer_daily_usd if role == "reviewer" else health.implementer_daily_usd
    ) or None
    choices = vendors(config, vendor_file, role)
    found = [v for v, _ in choices]
    chosen, holds = admission_holds(
        host,
        min_free_mib=config.run.min_free_mib,
        daily_cap_usd=cap,
        vendors=found,
        now_ms=now,
        min_free_memory_mib=config.run.min_free_memory_mib,
    )
    if chosen is None:
        return Admission(None, holds, unusable(found, now))
    _chosen, skipped = choose_vendor(found, now)
    if skipped:
        print(
            f"agentc-supervisor run: {role} vendor skipped: {'; '.join(skipped)}",
            file=sys.stderr,
            flush=True,
        )
    return Admission(next(c for v, c in choices if v is chosen), holds, unusable(found, now))


def unusable_now(config: SupervisorConfig, role: str = "implementer") -> list[dict[str, object]]:
    """The role's vendors that cannot be used now (:func:`.gates.unusable`), read afresh: what
    the heartbeat says during a launch, which may be waiting out the vendor's rate limit."""
    _kill, _ledger, vendor_file = paths(config)
    return unusable([v for v, _ in vendors(config, vendor_file, role)], now_ms())


def admit(
    config: SupervisorConfig, role: str = "implementer", running: Sequence[Running] = ()
) -> tuple[dict[str, str] | None, list[str]]:
    """The vendor to claim with for ``role``, or None and every reason this host must not claim
    now (:func:`measure`)."""
    found = measure(config, role, running)
    return found.choice, list(found.holds.values())
