"""``agentc-attention units``: the systemd timer units of a host's attention jobs, generated into
a folder (the host setup installs them; a test generates them without root), and the same jobs
as cron lines for a host without systemd.

Jobs: ``agentc-attention-check`` (every ``--check-interval``, from 2 minutes after boot),
``agentc-attention-digest`` (``--digest-calendar``, Persistent) and one
``agentc-attention-canary@<harness>`` per harness (``--canary-calendar``, Persistent; the runs
take turns on the canary lock). The services are oneshot, run as root under NoNewPrivileges,
ProtectSystem=strict and PrivateTmp, writing only the state directory.

Cron has no catch-up of a missed run and no sandbox; its schedules are translated from the same
values: an interval ``Nmin`` (N dividing 60) or ``Nh`` (N dividing 24), a calendar ``hourly``,
``daily``, ``weekly`` or ``*-*-* HH:MM[:00]``; any other form is refused rather than dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import ConfigError
from agentc.files import write_atomic
from agentc.files.procs import SYSTEM_PATH

HARNESS = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_INTERVAL = re.compile(r"^([1-9][0-9]*)(min|h)$")
_CALENDAR = re.compile(r"^\*-\*-\* ([01][0-9]|2[0-3]):([0-5][0-9])(:00)?$")
_SYSTEMD_VALUE = re.compile(r"^[A-Za-z0-9 *:/.,_-]{1,64}$")


@dataclass(frozen=True)
class Plan:
    program: str  # the agentc-attention executable (absolute)
    config: Path
    state_dir: Path
    check_interval: str = "10min"
    digest_calendar: str = "daily"
    canary_calendar: str = "*-*-* 00:00:00"
    harnesses: tuple[str, ...] = ()

    def check(self) -> None:
        if not Path(self.program).is_absolute() or not self.config.is_absolute():
            raise ConfigError("the program and --config must be absolute paths")
        for name, value in (
            ("--check-interval", self.check_interval),
            ("--digest-calendar", self.digest_calendar),
            ("--canary-calendar", self.canary_calendar),
        ):
            if not _SYSTEMD_VALUE.match(value):
                raise ConfigError(f"{name}: {value!r} is not a systemd time value")
        for harness in self.harnesses:
            if not HARNESS.match(harness):
                raise ConfigError(f"--harness {harness!r}: use 1-32 of [A-Za-z0-9_-]")


def oneshot_unit(description: str, exec_start: str, writable: Path) -> str:
    """A sandboxed root oneshot service writing only ``writable`` (the attention jobs' and the
    host's own timer services, agentc.host.services)."""
    return f"""[Unit]
Description={description}
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart={exec_start}
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
ReadWritePaths={writable}
UMask=0077
"""


def timer_unit(description: str, schedule: str) -> str:
    """A timer wanted by ``timers.target``; ``schedule`` is its ``[Timer]`` lines."""
    return f"""[Unit]
Description={description}

[Timer]
{schedule}

[Install]
WantedBy=timers.target
"""


def _service(plan: Plan, what: str, args: str) -> str:
    exec_start = f"{plan.program} --config {plan.config} {args}"
    return oneshot_unit(f"agentc attention: {what}", exec_start, plan.state_dir)


def _timer(what: str, schedule: str) -> str:
    return timer_unit(f"agentc attention: {what}", schedule)


def systemd_units(plan: Plan) -> dict[str, str]:
    """File name -> content of every unit."""
    plan.check()
    units = {
        "agentc-attention-check.service": _service(plan, "paging checks", "check"),
        "agentc-attention-check.timer": _timer(
            "paging checks", f"OnBootSec=2min\nOnUnitActiveSec={plan.check_interval}"
        ),
        "agentc-attention-digest.service": _service(plan, "the daily digest", "digest"),
        "agentc-attention-digest.timer": _timer(
            "the daily digest", f"OnCalendar={plan.digest_calendar}\nPersistent=true"
        ),
    }
    if plan.harnesses:
        units["agentc-attention-canary@.service"] = _service(
            plan, "the end-to-end canary of %i", "canary --harness %i"
        )
        units["agentc-attention-canary@.timer"] = _timer(
            "the end-to-end canary of %i", f"OnCalendar={plan.canary_calendar}\nPersistent=true"
        )
    return units


def cron_interval(value: str) -> str:
    found = _INTERVAL.match(value)
    if found:
        n, unit = int(found.group(1)), found.group(2)
        if unit == "min" and 60 % n == 0:
            return "* * * * *" if n == 1 else f"*/{n} * * * *"
        if unit == "h" and 24 % n == 0:
            return "0 * * * *" if n == 1 else f"0 */{n} * * *"
    raise ConfigError(
        f"--check-interval {value!r}: cron takes Nmin (N dividing 60) or Nh (N dividing 24)"
    )


def cron_calendar(value: str, what: str) -> str:
    fixed = {"hourly": "0 * * * *", "daily": "0 0 * * *", "weekly": "0 0 * * 1"}
    if value in fixed:
        return fixed[value]
    found = _CALENDAR.match(value)
    if found:
        return f"{int(found.group(2))} {int(found.group(1))} * * *"
    raise ConfigError(f"{what} {value!r}: cron takes hourly, daily, weekly or '*-*-* HH:MM'")


CRON_HEADER = ["SHELL=/bin/sh", f"PATH={SYSTEM_PATH}"]


def cron_jobs(plan: Plan, log_dir: Path = Path("/var/log")) -> list[str]:
    """The jobs' ``/etc/cron.d`` lines: as root, each logging to ``<log_dir>/agentc-*.log``."""
    plan.check()
    run = f"{plan.program} --config {plan.config}"
    lines = [
        f"{cron_interval(plan.check_interval)} root {run} check"
        f" >> {log_dir}/agentc-attention-check.log 2>&1",
        f"{cron_calendar(plan.digest_calendar, '--digest-calendar')} root {run} digest"
        f" >> {log_dir}/agentc-attention-digest.log 2>&1",
    ]
    when = cron_calendar(plan.canary_calendar, "--canary-calendar") if plan.harnesses else ""
    for harness in plan.harnesses:
        lines.append(
            f"{when} root {run} canary --harness {harness}"
            f" >> {log_dir}/agentc-attention-canary-{harness}.log 2>&1"
        )
    return lines


def cron_lines(plan: Plan) -> str:
    """An ``/etc/cron.d`` file: the same jobs, as root, logging to /var/log/agentc-*.log."""
    lines = [
        "# agentc attention jobs (agentc-attention units --cron); cron does not catch up on",
        "# a run missed while the host was off, and runs the jobs without a sandbox.",
        *CRON_HEADER,
        *cron_jobs(plan),
    ]
    return "\n".join(lines) + "\n"


def generate(plan: Plan, out: Path, cron: bool) -> list[Path]:
    """Write the units (or the cron file ``agentc-attention``) into ``out``; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"agentc-attention": cron_lines(plan)} if cron else systemd_units(plan)
    written = []
    for name, text in files.items():
        write_atomic(out / name, text.encode(), mode=0o644)
        written.append(out / name)
    return written
