"""``agentc-host setup``: bring the machine (or a ``--prefix`` folder) to the plan, changing only
what differs, and say what changed; a second run says nothing changed.

Order: every refusal first (:mod:`agentc.host.refusals`; on any, nothing is changed), then the
accounts, directories (parents first; an existing one is sealed, never chowned recursively),
files, links and credentials, then what an earlier run made and this plan no longer has (a
unit for a harness dropped from the canary), then the units: on a host where systemd runs,
``daemon-reload`` and the newly enabled units started, the newly disabled stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentc.files import write_atomic
from agentc.files.procs import run_check
from agentc.host import accounts, services
from agentc.host.plan import Account, Credential, Dir, File, Link, Plan, build
from agentc.host.record import Machine
from agentc.host.refusals import RETIRED_LOGIN, refusals
from agentc.host.settings import HostSettings

SYSTEMCTL_SECONDS = 120.0


@dataclass
class Report:
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # what the owner does next
    problems: list[str] = field(default_factory=list)


def init_of(settings: HostSettings, machine: Machine) -> Literal["systemd", "cron"]:
    if settings.init != "auto":
        return settings.init
    return "systemd" if machine.systemd_running() else "cron"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _identity(info: os.stat_result) -> list[int]:
    """An inode as setup left it: any later change of its content or metadata (or a new file
    on a reused inode number) changes its ctime."""
    return [info.st_dev, info.st_ino, info.st_ctime_ns]


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def setup(settings: HostSettings, settings_path: Path | None, prefix: Path | None) -> Report:
    machine = Machine(prefix, settings.record)
    init = init_of(settings, machine)
    plan = build(settings, init, services.readiness(settings, machine.where), settings_path)
    report = Report(problems=refusals(settings, plan, machine))
    if not report.problems:
        Apply(settings, machine, plan, report).run()
    return report


class Apply:
    def __init__(self, settings: HostSettings, machine: Machine, plan: Plan, report: Report):
        self.settings = settings
        self.machine = machine
        self.plan = plan
        self.report = report
        self.record = machine.record
        self.units_changed = False

    def change(self, text: str, unit: bool = False) -> None:
        self.report.changes.append(text)
        self.units_changed |= unit

    def run(self) -> None:
        self.record.init = self.plan.init
        for account in self.plan.accounts:
            self.account(account)
        for folder in self.plan.dirs:
            self.folder(folder)
        for file in self.plan.files:
            self.file(file)
        for link in self.plan.links:
            self.link(link)
        for credential in self.plan.credentials:
            self.credential(credential)
        self.stale()
        self.units()
        self.machine.save()

    # -- accounts ---------------------------------------------------------------------------

    def account(self, account: Account) -> None:
        name, key = account.name, account.key
        if self.machine.account_exists(name):
            self.record.accounts.setdefault(name, {"key": key, "created": False})
            return
        argv = " ".join(accounts.useradd_argv(account))
        if self.machine.prefix is None:
            accounts.create(account)
            self.change(f"made the {account.who}'s account {name} ({argv})")
        else:
            self.change(f"planned the {account.who}'s account {name} ({argv})")
        self.record.accounts[name] = {"key": key, "created": True, "home": str(account.home)}

    # -- paths ------------------------------------------------------------------------------

    def _owned(self, path: Path, info: os.stat_result, owner: str, group: str, mode: int) -> bool:
        return (
            self.machine.owner_of(path, info) == (owner, group)
            and stat.S_IMODE(info.st_mode) == mode
        )

    def _seal(self, path: Path, owner: str, group: str, mode: int) -> None:
        where = self.machine.where(path)
        self.machine.chown(path, owner, group)
        os.chmod(where, mode, follow_symlinks=False)

    def _entry(self, path: Path, **fields: Any) -> None:
        entry = self.record.paths.setdefault(str(path), {})
        entry.update(fields)

    def folder(self, folder: Dir) -> None:
        where = self.machine.where(folder.path)
        info = _lstat(where)
        fields = {"type": "dir", "owner": folder.owner, "group": folder.group,
                  "mode": f"{folder.mode:04o}", "kind": folder.kind}  # fmt: skip
        if info is None:
            where.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(where, folder.mode)
            self._seal(folder.path, folder.owner, folder.group, folder.mode)
            self._entry(folder.path, created=True, **fields)
            self.change(f"made {folder.path} ({folder.owner}:{folder.group} {folder.mode:04o})")
            return
        self.record.paths.setdefault(str(folder.path), {"created": False})
        if folder.kind == "system":  # the host's own directory: used as it is
            self._entry(folder.path, type="dir", kind="system")
            return
        self._entry(folder.path, **fields)
        if not self._owned(folder.path, info, folder.owner, folder.group, folder.mode):
            self._seal(folder.path, folder.owner, folder.group, folder.mode)
            self.change(f"sealed {folder.path} ({folder.owner}:{folder.group} {folder.mode:04o})")

    def file(self, file: File) -> None:
        where = self.machine.where(file.path)
        info = _lstat(where)
        current = where.read_bytes() if info is not None and stat.S_ISREG(info.st_mode) else None
        entry = self.record.paths.get(str(file.path), {})
        if file.kind == "settings" and current is not None:
            if entry.get("sha256") != digest(current):
                self.report.notes.append(f"kept {file.path}: it is not the one setup wrote")
            elif current != file.data:
                self._write(file, f"updated {file.path} (nobody had edited it)")
            return
        if current is not None and info is not None and self._unchanged(file, info, current):
            return
        if file.kind == "seed" and current is not None:
            self._write(file, f"replaced {file.path} with a fresh root-owned inode")
        else:
            self._write(file, f"wrote {file.path}", unit=file.kind == "generated")

    def _unchanged(self, file: File, info: os.stat_result, current: bytes) -> bool:
        entry = self.record.paths.get(str(file.path), {})
        same = current == file.data and self._owned(
            file.path, info, file.owner, file.group, file.mode
        )
        if file.kind == "seed":  # only the inode setup made, untouched since, is known safe
            same = same and entry.get("inode") == _identity(info)
        return same

    def _write(self, file: File, text: str, unit: bool = False) -> None:
        where = self.machine.where(file.path)
        where.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(where, file.data, mode=file.mode)
        self.machine.chown(file.path, file.owner, file.group)
        info = os.lstat(where)
        self._entry(file.path, type="file", kind=file.kind, owner=file.owner, group=file.group,
                    mode=f"{file.mode:04o}", sha256=digest(file.data),
                    inode=_identity(info))  # fmt: skip
        self.change(text, unit)

    def link(self, link: Link) -> None:
        where = self.machine.where(link.path)
        with contextlib.suppress(OSError):
            if os.readlink(where) == link.target:
                self._entry(link.path, type="link", target=link.target)
                return
        where.parent.mkdir(parents=True, exist_ok=True)
        temp = where.with_name(f".{where.name}.{os.getpid()}.new")
        temp.unlink(missing_ok=True)
        os.symlink(link.target, temp)
        os.replace(temp, where)
        self._entry(link.path, type="link", target=link.target)
        self.change(f"linked {link.path} -> {link.target}", unit=True)

    def credential(self, credential: Credential) -> None:
        where = self.machine.where(credential.path)
        info = _lstat(where)
        self._entry(credential.path, type="credential", owner=credential.owner,
                    group=credential.group, mode=f"{credential.mode:04o}")  # fmt: skip
        if info is None:
            self.report.steps.append(
                f"place {credential.what} at {credential.path} (install -o {credential.owner} "
                f"-g {credential.group} -m {credential.mode:04o} /dev/stdin {credential.path})"
            )
            return
        mode, owner, group = credential.mode, credential.owner, credential.group
        if not self._owned(credential.path, info, owner, group, mode):  # (prefix: as recorded)
            self._seal(credential.path, owner, group, mode)
            self.change(f"held {credential.path} at {owner}:{group} {mode:04o}")

    # -- what an earlier run made ------------------------------------------------------------

    def stale(self) -> None:
        planned = {str(f.path) for f in self.plan.files} | {str(k.path) for k in self.plan.links}
        for path, entry in sorted(self.record.paths.items()):
            kind = entry.get("kind")
            gone = entry.get("type") == "link" or kind in ("generated", "seed")
            if path in planned or not gone:
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.machine.where(Path(path)))
            del self.record.paths[path]
            self.change(f"removed {path} (no longer part of the host)", unit=True)
        for folder in self.plan.dirs:  # a retired claude login left in a protected directory
            retired = self.machine.where(folder.path / RETIRED_LOGIN)
            if folder.path.name == "claude-config" and _lstat(retired) is not None:
                shred(retired)
                self.change(f"removed the retired claude login {folder.path / RETIRED_LOGIN}")

    # -- units ------------------------------------------------------------------------------

    def units(self) -> None:
        before, now = set(self.record.enabled), set(self.plan.enabled)
        self.record.enabled = sorted(now)
        for unit in sorted(now - before):
            self.change(f"enabled {unit}")
        for unit in sorted(before - now):
            self.change(f"disabled {unit}")
        self.report.notes += [f"waiting: {line}" for line in self.plan.waiting]
        if self.machine.prefix is not None:
            return
        if self.plan.init == "cron":
            for name in _service_names(self.settings, before - now):
                from agentc.host import servicectl

                servicectl.Cron(self.settings).stop(name)
            return
        if not self.machine.systemd_running():
            self.report.notes.append(
                "systemd is not running here: the units are written and enabled, not started"
            )
            return
        if self.units_changed or before != now:
            systemctl("daemon-reload")
        for unit in sorted(before - now):
            systemctl("stop", unit)
        for unit in sorted(now - before):
            systemctl("start", unit)


def _service_names(settings: HostSettings, units: set[str]) -> list[str]:
    return [s.name for s in services.services(settings).values() if s.unit in units]


def systemctl(*args: str) -> None:
    done = run_check(
        ["systemctl", *args], env={"PATH": "/usr/bin:/bin", "LANG": "C"}, timeout=SYSTEMCTL_SECONDS
    )
    if done.returncode != 0:
        from agentc.core.errors import ConfigError

        raise ConfigError(f"systemctl {' '.join(args)} failed: {done.stderr.strip()[:300]}")


def shred(path: Path) -> None:
    """Overwrite a regular single-link file with zeros, then delete it (a link: just delete)."""
    info = os.lstat(path)
    if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, b"\0" * info.st_size)
            os.fsync(fd)
        finally:
            os.close(fd)
    os.unlink(path)
