"""agentc-attention units: the systemd timer units generated into a folder (no root needed) and
checked by systemd-analyze itself; the cron fallback's translation, and the forms it refuses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.attention.kit import attention


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "attention.toml"
    path.write_text(
        'origin = "https://agents.example.org"\nproject_id = "p1"\n'
        f'token_file = "{tmp_path / "token"}"\nstate_dir = "{tmp_path / "state"}"\n'
    )
    return path


def test_the_units_are_what_systemd_accepts(tmp_path: Path) -> None:
    config, out = _config(tmp_path), tmp_path / "units"
    done = attention(
        config, "units", "--out", str(out), "--harness", "claude", "--harness", "codex"
    )
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "agentc-attention-canary@.service",
        "agentc-attention-canary@.timer",
        "agentc-attention-check.service",
        "agentc-attention-check.timer",
        "agentc-attention-digest.service",
        "agentc-attention-digest.timer",
    ]
    check = (out / "agentc-attention-check.service").read_text()
    assert f"--config {config} check" in check and "ProtectSystem=strict" in check
    assert f"ReadWritePaths={tmp_path / 'state'}" in check and "NoNewPrivileges=yes" in check
    assert "OnUnitActiveSec=10min" in (out / "agentc-attention-check.timer").read_text()
    digest = (out / "agentc-attention-digest.timer").read_text()
    assert "OnCalendar=daily" in digest and "Persistent=true" in digest
    assert "canary --harness %i" in (out / "agentc-attention-canary@.service").read_text()
    assert (out / "agentc-attention-check.service").stat().st_mode & 0o777 == 0o644

    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze verifies the units (apt-get install systemd)"
    for kind in ("service", "timer"):  # a template is verified as an instance
        shutil.copy(
            out / f"agentc-attention-canary@.{kind}", out / f"agentc-attention-canary@claude.{kind}"
        )
    units = [str(p) for p in sorted(out.iterdir()) if "@." not in p.name]
    verified = subprocess.run(
        [analyze, "verify", "--man=no", *units], capture_output=True, text=True, timeout=120
    )
    assert verified.returncode == 0, verified.stderr
    # The verification can fail: a timer without a valid schedule is refused.
    bad = out / "agentc-attention-check.timer"
    schedule = "OnBootSec=2min\nOnUnitActiveSec=10min"
    bad.write_text(bad.read_text().replace(schedule, "OnCalendar=never-ever"))
    refused = subprocess.run(
        [analyze, "verify", "--man=no", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode != 0


def test_the_cron_fallback_translates_the_schedules(tmp_path: Path) -> None:
    config, out = _config(tmp_path), tmp_path / "cron"
    done = attention(
        config, "units", "--out", str(out), "--cron", "--harness", "claude",
        "--check-interval", "5min", "--canary-calendar", "*-*-* 03:30",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = (out / "agentc-attention").read_text().splitlines()
    jobs = [line for line in lines if " root " in line]
    assert jobs[0].startswith("*/5 * * * * root /")  # the program by its absolute path
    assert f"--config {config} check >> /var/log/agentc-attention-check.log 2>&1" in jobs[0]
    assert jobs[1].startswith("0 0 * * * root ") and jobs[1].endswith(
        "digest >> /var/log/agentc-attention-digest.log 2>&1"
    )
    assert jobs[2].startswith("30 3 * * * root ") and "canary --harness claude" in jobs[2]


@pytest.mark.parametrize(
    ("flag", "value", "problem"),
    [
        ("--check-interval", "7min", "cron takes Nmin (N dividing 60) or Nh"),
        ("--check-interval", "5h", "cron takes Nmin (N dividing 60) or Nh"),
        ("--digest-calendar", "Mon *-*-* 07:00", "cron takes hourly, daily, weekly"),
        ("--canary-calendar", "monthly", "cron takes hourly, daily, weekly"),
    ],
)
def test_a_schedule_cron_cannot_take_is_refused_not_dropped(
    tmp_path: Path, flag: str, value: str, problem: str
) -> None:
    out = tmp_path / "cron"
    done = attention(
        _config(tmp_path), "units", "--out", str(out), "--cron", "--harness", "claude", flag, value
    )
    assert done.returncode == 2 and problem in done.stderr
    assert not (out / "agentc-attention").exists()


def test_a_value_that_would_inject_into_a_unit_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "units"
    for args in (
        ("--check-interval", "10min\nExecStartPre=/bin/sh -c evil"),
        ("--harness", "claude; rm -rf /"),
    ):
        done = attention(_config(tmp_path), "units", "--out", str(out), *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert not out.exists() or not list(out.iterdir())
