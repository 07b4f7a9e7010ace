"""``agentc-host setup --uninstall``: stop and remove what setup installed, by the record.

Services and timers stop first (systemd: ``disable --now``; cron: the file goes, then each
service's lock holder gets SIGTERM), then the accounts setup made are retired
(:func:`agentc.host.accounts.retire`), then what setup wrote goes: units, links, seeds, the
role accounts' own trees, a settings file nobody edited (an edited one is kept and named). The
owner's keys and tokens stay, handed back to root (0400, or 0644 for the signers file) since
their account or group is gone. Directories setup made are removed once empty; whatever is left
is named. The record goes last. The updater's releases, saved harnesses, state and lock go too;
its results file ``update.jsonl`` stays.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from pathlib import Path

from agentc.host import accounts, services
from agentc.host.record import Machine
from agentc.host.settings import HostSettings
from agentc.host.setup import Report, systemctl


def uninstall(settings: HostSettings, prefix: Path | None) -> Report:
    machine = Machine(prefix, settings.record)
    record = machine.record
    report = Report()
    if not record.paths and not record.accounts:
        report.notes.append(f"nothing to remove: no setup record at {settings.record}")
        return report
    _stop(settings, machine, report)
    if prefix is None:
        for name, entry in sorted(record.accounts.items()):
            if entry.get("created"):
                report.problems += accounts.retire(name)
                report.changes.append(f"retired the account {name}")
    elif record.accounts:
        report.changes.append(f"forgot the planned accounts {', '.join(sorted(record.accounts))}")
    for path, entry in sorted(record.paths.items(), reverse=True):
        _remove(settings, machine, Path(path), entry, report)
    _releases(settings, machine, report)
    machine.forget()  # before the state directory that holds it is removed
    for path, entry in sorted(record.paths.items(), key=lambda i: -len(Path(i[0]).parts)):
        if entry.get("type") == "dir" and entry.get("created"):
            with contextlib.suppress(FileNotFoundError):
                try:
                    os.rmdir(machine.where(Path(path)))
                    report.changes.append(f"removed {path}")
                except OSError:
                    report.notes.append(f"left {path}: it is not empty")
    return report


def _stop(settings: HostSettings, machine: Machine, report: Report) -> None:
    record = machine.record
    if machine.prefix is not None or not record.enabled:
        return
    if record.init == "systemd":
        if machine.systemd_running():
            for unit in record.enabled:
                systemctl("disable", "--now", unit)
        report.changes += [f"stopped {unit}" for unit in record.enabled]
        return
    with contextlib.suppress(FileNotFoundError):  # cron first, so it starts nothing again
        os.unlink(settings.cron_dir / services.CRON_FILE)
    from agentc.host.servicectl import Cron

    control = Cron(settings)
    for service in services.services(settings).values():
        if control.is_active(service.name):
            control.stop(service.name)
            report.changes.append(f"stopped the {service.name} service")


def _remove(
    settings: HostSettings, machine: Machine, path: Path, entry: dict[str, object], report: Report
) -> None:
    where = machine.where(path)
    kind, what = entry.get("type"), entry.get("kind")
    try:
        info = os.lstat(where)
    except FileNotFoundError:
        return
    if kind == "credential":
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            mode = 0o400 if entry.get("mode") != "0644" else 0o644
            if machine.prefix is None:
                os.chown(where, 0, 0, follow_symlinks=False)
            os.chmod(where, mode)
            report.notes.append(f"kept {path} (yours: now root {mode:04o})")
        else:
            report.notes.append(f"kept {path} untouched: it is not a plain single-link file")
        return
    if kind == "dir" and what == "tree" and stat.S_ISDIR(info.st_mode):
        shutil.rmtree(where)  # the retired account's own tree; never follows a symlink
        report.changes.append(f"removed {path} and its content")
        return
    if kind == "link" or (kind == "file" and what in ("generated", "seed")):
        os.unlink(where)
        report.changes.append(f"removed {path}")
        return
    if kind == "file" and what == "settings":
        data = where.read_bytes() if stat.S_ISREG(info.st_mode) else b""
        if hashlib.sha256(data).hexdigest() == entry.get("sha256"):
            os.unlink(where)
            report.changes.append(f"removed {path}")
        else:
            report.notes.append(f"kept {path}: it was edited after setup wrote it")


def _releases(settings: HostSettings, machine: Machine, report: Report) -> None:
    """The updater's releases and the link to the live one."""
    current = machine.where(settings.current)
    with contextlib.suppress(FileNotFoundError):
        if os.path.islink(current):
            os.unlink(current)
            report.changes.append(f"removed {settings.current}")
    releases = machine.where(settings.releases)
    if releases.is_dir() and not releases.is_symlink():
        for child in sorted(releases.iterdir()):
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            report.changes.append(f"removed {settings.releases / child.name}")
    saved = settings.opt_dir / "harness-saved"
    if machine.where(saved).is_dir() and not machine.where(saved).is_symlink():
        shutil.rmtree(machine.where(saved))
        report.changes.append(f"removed {saved}")
    for name in ("update-state.json", "update.lock"):  # update.jsonl, the results, stays
        path = settings.state_dir / name
        with contextlib.suppress(FileNotFoundError):
            os.unlink(machine.where(path))
            report.changes.append(f"removed {path}")
