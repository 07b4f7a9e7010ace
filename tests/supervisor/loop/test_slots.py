"""How many launches at once: ``[run] launches``, or derived from the machine; the review
reserve; what admission counts of the running launches; a running launch's spend, metered
for its renewals (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentc.core.errors import ConfigError
from agentc.gateway.ledger import LaunchSpend
from agentc.supervisor.config import SupervisorConfig, load_config
from agentc.supervisor.loop import admission, slots


def _config(tmp_path: Path, text: str) -> SupervisorConfig:
    path = tmp_path / "supervisor.toml"
    path.write_text(f'mode = "personal"\nstate_dir = "{tmp_path / "state"}"\n' + text)
    return load_config(path)


@pytest.mark.parametrize(
    ("cores", "memory", "per_launch", "count"),
    [
        (2, 24105, 8192, 2),  # this machine: its CPUs bound it
        (16, 24105, 8192, 2),  # memory at the per-launch limit bounds it
        (16, 65536, 8192, 8),
        (1, 65536, 8192, 1),
        (4, 4096, 8192, 1),  # at least one
        (8, 2048, 0, 8),  # no memory limit: the CPUs
        (8, None, 8192, 8),  # memory unknown: the CPUs
    ],
)
def test_the_machine_s_number_of_launches(
    cores: int, memory: int | None, per_launch: int, count: int
) -> None:
    got, why = slots.derived(cores, memory, per_launch)
    assert got == count and why.startswith("derived from this machine: ")
    assert why.endswith("; set [run] launches to choose")


def test_the_meminfo_figures(tmp_path: Path) -> None:
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24684292 kB\nMemAvailable:   22581008 kB\n")
    assert slots.memory_mib(info) == 24105
    assert slots.memory_mib(info, "MemAvailable") == 22051
    assert slots.memory_mib(info, "SwapTotal") is None
    assert slots.memory_mib(tmp_path / "missing") is None


def test_the_setting_wins_and_the_review_reserve_must_leave_an_implementer(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, "[run]\nlaunches = 3\nreview_slots = 1\nreviewer = true\n")
    found = slots.size(config)
    assert (found.total, found.reviews, found.implementers) == (3, 1, 2)
    assert found.line() == "up to 3 launches at once ([run] launches; 1 kept for reviews)"
    without_reviews = _config(tmp_path, "[run]\nlaunches = 1\nreview_slots = 1\n")
    assert slots.size(without_reviews).reviews == 0
    one = _config(tmp_path, "[run]\nlaunches = 1\nreview_slots = 1\nreviewer = true\n")
    with pytest.raises(ConfigError, match="run.review_slots: 1 slots kept for reviews leave"):
        slots.size(one)


def test_admission_reserves_for_running_launches_what_they_may_still_spend(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, "[health]\nlaunch_reserve_usd = 5.0\n")
    ledger = tmp_path / "ledger.jsonl"
    rows = [
        {"session": "a", "role": "impl", "usd_for_caps": 1.5, "at_ms": 10**13},
        {"session": "b", "role": "impl", "usd_for_caps": 7.0, "at_ms": 10**13},
        {"session": "c", "role": "rev", "usd_for_caps": 2.0, "at_ms": 10**13},
    ]
    ledger.write_text("".join(json.dumps(r) + "\n" for r in rows))
    day, each = admission.spending(ledger, "impl", 10**13, ["a", "b", "x"])
    assert day == 8.5 and each == {"a": 1.5, "b": 7.0, "x": 0.0}
    running = [
        admission.Running("a", "claude"),  # 5.0 - 1.5
        admission.Running("b", "claude"),  # spent past the reserve: nothing more
        admission.Running("x", "codex"),  # 5.0
        admission.Running("y", "command:/bin/agent"),  # no model: nothing
    ]
    assert admission.reserved(config, running, each) == 8.5


def test_the_meter_reads_a_running_launch_s_spend_as_the_ledger_grows(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    meter = LaunchSpend(ledger, "L1")
    assert meter.spent() is None  # no ledger yet: nothing to tell
    with ledger.open("w") as out:
        out.write(json.dumps({"session": "L2", "usd": 5.0}) + "\n")
        out.write(json.dumps({"session": "L1", "usd": 0.25}) + "\n")
        out.write('{"session": "L1", "us')  # a row being written
    assert meter.spent() == 0.25
    with ledger.open("a") as out:
        out.write('d": 0.5}\n')
    assert meter.spent() == 0.75  # only the new bytes were read
    assert meter.tokens == 0  # two calls, no tokens in these rows
    with ledger.open("a") as out:
        out.write(json.dumps({"session": "L1", "usd": None}) + "\n")
    assert meter.spent() is None  # an unpriced call: no figure reads as the whole (D47)
    ledger.write_text(json.dumps({"session": "L1", "usd": 0.125}) + "\n")  # a new, shorter one
    assert meter.spent() == 0.125
