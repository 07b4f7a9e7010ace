"""The host's long-running services and timers, as systemd units or ``/etc/cron.d`` lines.

Four services: the egress proxy (as the egress account), the loop (``agentc-supervisor run``), the
model gateway and the integrator (root). Each unit, and each cron line, runs ``agentc-host
service <name>`` (:mod:`agentc.host.servicectl`), which makes the service's runtime directory,
takes its lock, switches to its account and execs the program: one way to start a service,
under systemd or cron. A unit is enabled only once what it needs is configured (:class:`Ready`);
until then setup names what it waits for.

Timers: the attention jobs (their units come from :mod:`agentc.attention.units`, the one home
of their generation) and the updater's daily run. Under cron a service is a line every minute:
``agentc-host service`` exits at once while the service holds its lock, so a crashed service
is back within a minute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentc.attention import units as attention_units
from agentc.core.errors import AgentcError
from agentc.host.parts import Dir, File, Link, Plan
from agentc.host.settings import HostSettings

SERVICES = ("egress", "loop", "gateway", "integrator")
CRON_FILE = "agentc-host"
MULTI_USER = "multi-user.target"
TIMERS = "timers.target"


@dataclass(frozen=True)
class Service:
    name: str
    unit: str
    description: str
    argv: tuple[str, ...]
    user: str | None  # the account it runs as; None: root
    # Directories made (owner, mode) before it starts: its runtime directory.
    dirs: tuple[tuple[Path, str, int], ...] = ()
    after: tuple[str, ...] = ()
    drains: bool = False  # SIGTERM to the program alone; it drains its launch (the loop)


def services(settings: HostSettings) -> dict[str, Service]:
    bin_dir, etc, names = settings.bin_dir, settings.etc_dir, settings.accounts
    supervisor = str(bin_dir / "agentc-supervisor")
    egress = Service(
        "egress",
        "agentc-egress.service",
        "the egress proxy",
        (supervisor, "egress-proxy", "--socket", str(settings.egress_socket),
         "--allow-user", names.implementer, "--allow-user", names.reviewer,
         "--log", str(settings.state_dir / "egress" / "proxy.jsonl")),
        names.egress,
        dirs=((settings.egress_socket.parent, names.egress, 0o755),),
    )  # fmt: skip
    loop = Service(
        "loop",
        "agentc-run.service",
        "the supervisor loop",
        (supervisor, "--config", str(settings.supervisor_toml), "run"),
        None,
        after=("agentc-egress.service", "agentc-gateway.service"),
        drains=True,
    )
    gateway = Service(
        "gateway",
        "agentc-gateway.service",
        "the model gateway",
        (supervisor, "model-gateway", "--config", str(etc / "gateway.toml")),
        None,
    )
    integrator = Service(
        "integrator",
        "agentc-integrator.service",
        "the integrator",
        (str(bin_dir / "agentc-integrator"), "--config", str(etc / "integrator.toml"), "run"),
        None,
    )
    return {s.name: s for s in (egress, loop, gateway, integrator)}


@dataclass(frozen=True)
class Ready:
    """What is configured: for each service and timer, None when it may run, else what it waits
    for; and the attention jobs' settings when they are configured."""

    waiting: dict[str, str] = field(default_factory=dict)  # service or timer -> why
    attention_state: Path | None = None
    canary_harnesses: tuple[str, ...] = ()

    def ready(self, name: str) -> bool:
        return name not in self.waiting


def readiness(settings: HostSettings, where: Callable[[Path], Path]) -> Ready:
    """Read what is configured; ``where`` maps a host path to where it is (the prefix)."""
    from agentc.attention.config import AttentionConfig
    from agentc.supervisor.config import SupervisorConfig

    waiting: dict[str, str] = {}
    etc = settings.etc_dir
    if not where(settings.current).exists():  # nothing to run yet
        release = f"a release in {settings.current} (agentc-host update)"
        return Ready(dict.fromkeys([*SERVICES, "attention", "update"], release))
    try:
        loaded = SupervisorConfig.load(where(settings.supervisor_toml))
        if loaded.run.binding is None:
            waiting["loop"] = f"[run.binding] in {settings.supervisor_toml}"
    except AgentcError:
        waiting["loop"] = f"a valid {settings.supervisor_toml} with [run.binding]"
    for name in ("gateway", "integrator"):
        if not where(etc / f"{name}.toml").exists():
            waiting[name] = f"{etc / name}.toml"
    attention_state: Path | None = None
    harnesses: tuple[str, ...] = ()
    attention = etc / "attention.toml"
    try:
        config = AttentionConfig.load(where(attention), what="attention configuration")
        if not where(config.token_file).exists():
            waiting["attention"] = f"its token_file {config.token_file}"
        attention_state, harnesses = config.state_dir, tuple(config.canary.harnesses)
    except AgentcError:
        waiting["attention"] = f"a valid {attention}"
    update = settings.update
    if update.index is None:
        waiting["update"] = "[update] index in host.toml"
    elif not where(settings.signers_file).exists():
        waiting["update"] = f"the release signers file {settings.signers_file}"
    elif not update.timer:
        waiting["update"] = "[update] timer = true in host.toml"
    return Ready(waiting, attention_state, harnesses)


def host_command(settings_path: Path | None, bin_dir: Path) -> str:
    """How units and cron lines call ``agentc-host`` (with the settings file they were made
    from)."""
    config = f" --config {settings_path}" if settings_path is not None else ""
    return f"{bin_dir / 'agentc-host'}{config}"


def service_unit(service: Service, command: str) -> str:
    after = " ".join(("network-online.target", *service.after))
    drain = "KillMode=mixed\nTimeoutStopSec=300\n" if service.drains else ""
    return f"""[Unit]
Description=agentc: {service.description}
After={after}
Wants=network-online.target

[Service]
ExecStart={command} service {service.name}
Restart=on-failure
RestartSec=30
{drain}UMask=0077

[Install]
WantedBy={MULTI_USER}
"""


def update_unit(command: str) -> str:
    # Not sandboxed: it replaces /opt/agentc's release and restarts services.
    return f"""[Unit]
Description=agentc: the verified updater
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart={command} update
TimeoutStartSec=12h
UMask=0022
"""


def _attention(settings: HostSettings, ready: Ready) -> attention_units.Plan:
    return attention_units.Plan(
        program=str(settings.bin_dir / "agentc-attention"),
        config=settings.etc_dir / "attention.toml",
        state_dir=ready.attention_state or settings.state_dir / "attention",
        check_interval=settings.timers.attention_check_interval,
        digest_calendar=settings.timers.attention_digest_calendar,
        canary_calendar=settings.timers.attention_canary_calendar,
        harnesses=ready.canary_harnesses,
    )


def add_units(settings: HostSettings, plan: Plan, ready: Ready, path: Path | None = None) -> None:
    """The units (or the cron file) into ``plan``, and which are enabled or waiting."""
    command = host_command(path, settings.bin_dir)
    attention = _attention(settings, ready)
    timers = {
        "agentc-attention-check.timer": "attention",
        "agentc-attention-digest.timer": "attention",
        **{f"agentc-attention-canary@{h}.timer": "attention" for h in attention.harnesses},
        "agentc-update.timer": "update",
    }
    jobs = {s.unit: s.name for s in services(settings).values()} | timers
    for unit, name in jobs.items():
        if ready.ready(name):
            plan.enabled.append(unit)
        else:
            plan.waiting.append(f"{unit}: waits for {ready.waiting[name]}")
    if plan.init == "cron":
        cron = settings.cron_dir
        plan.dirs.append(Dir(cron, "root", "root", 0o755, "system"))
        plan.dirs.append(Dir(settings.log_dir, "root", "root", 0o755, "system"))  # the jobs' logs
        text = cron_file(settings, command, attention, ready)
        plan.files.append(File(cron / CRON_FILE, text.encode(), "root", "root", 0o644, "generated"))
        return
    units = {s.unit: service_unit(s, command) for s in services(settings).values()}
    units |= attention_units.systemd_units(attention)
    units["agentc-update.service"] = update_unit(command)
    schedule = (
        f"OnCalendar={settings.timers.update_calendar}\nRandomizedDelaySec=1h\nPersistent=true"
    )
    units["agentc-update.timer"] = attention_units.timer_unit(
        "agentc: the verified updater", schedule
    )
    systemd = settings.systemd_dir
    plan.dirs.append(Dir(systemd, "root", "root", 0o755, "system"))
    for name, text in units.items():
        plan.files.append(File(systemd / name, text.encode(), "root", "root", 0o644, "generated"))
    for target in (MULTI_USER, TIMERS):
        wants = [u for u in plan.enabled if (u.endswith(".timer")) == (target == TIMERS)]
        if wants:
            plan.dirs.append(Dir(systemd / f"{target}.wants", "root", "root", 0o755))
        for unit in wants:
            plan.links.append(Link(systemd / f"{target}.wants" / unit, str(systemd / _file(unit))))


def _file(unit: str) -> str:
    """The unit file an instance comes from (``x@claude.timer``: ``x@.timer``)."""
    if "@" not in unit:
        return unit
    stem, _, instance = unit.partition("@")
    return f"{stem}@{instance[instance.rindex('.') :]}"


def cron_file(
    settings: HostSettings, command: str, attention: attention_units.Plan, ready: Ready
) -> str:
    """``/etc/cron.d/agentc-host``: a line per ready service (every minute), the attention jobs
    and the updater once configured. Cron does not catch up on a missed run."""
    log = settings.log_dir
    lines = ["# agentc-host setup (docs/host.md); rewritten by each setup run"]
    lines += attention_units.CRON_HEADER
    for service in services(settings).values():
        if ready.ready(service.name):
            lines.append(
                f"* * * * * root {command} service {service.name}"
                f" >> {log}/agentc-{service.name}.log 2>&1"
            )
    if ready.ready("attention"):
        lines += attention_units.cron_jobs(attention, log)
    if ready.ready("update"):
        when = attention_units.cron_calendar(settings.timers.update_calendar, "update_calendar")
        lines.append(f"{when} root {command} update >> {log}/agentc-update.log 2>&1")
    return "\n".join(lines) + "\n"
