"""Running the host's services: ``agentc-host service <name>`` and the two service managers.

``service`` takes the service's lock (``<run>/agentc-host/<name>.lock``; held by another
process: it is running, exit 0 quietly), makes its runtime directory (never through a symlink),
switches to its account (:func:`agentc.files.accounts.become`: no supplementary groups)
and execs the program, which keeps the lock for its life. Under systemd the unit runs it; under
cron a line runs it every minute.

The updater stops, starts and asks about a service through a manager: :class:`Systemd`
(``systemctl``) or :class:`Cron`, which reads the lock: held is running; stopping sends SIGTERM to
the process holding it (the loop drains its launch), then after the timeout SIGKILL to its
process group; starting runs ``agentc-host service`` apart, as cron would.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import stat
import time
from pathlib import Path
from typing import Protocol

from agentc.core.errors import ConfigError
from agentc.files import locks
from agentc.files.procs import run_check, start_detached, system_env
from agentc.host import services
from agentc.host.record import gid_of, uid_of
from agentc.host.settings import HostSettings

ENV = system_env()
START_SECONDS = 15.0
STOP_SECONDS = 300.0


def lock_path(settings: HostSettings, name: str) -> Path:
    return settings.run_dir / "agentc-host" / f"{name}.lock"


def _directory(path: Path, owner: str, mode: int) -> None:
    """``path`` a directory of ``owner`` with ``mode``, made if missing; a symlink or anything
    else there is refused (never followed)."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path} is not a directory (move it away)")
    os.chown(path, uid_of(owner), gid_of(owner), follow_symlinks=False)
    os.chmod(path, mode, follow_symlinks=False)


def serve(settings: HostSettings, name: str) -> int:
    """Run the service ``name`` in this process (exec, never returning); 0 at once when it
    already runs."""
    service = services.services(settings).get(name)
    if service is None:
        raise ConfigError(f"no service {name!r} (one of {', '.join(services.SERVICES)})")
    settings.run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)  # /run: there already
    _directory(settings.run_dir / "agentc-host", "root", 0o755)
    fd = locks.hold(lock_path(settings, name))
    if fd is None:
        return 0
    for path, owner, mode in service.dirs:
        _directory(path, owner, mode)
    os.set_inheritable(fd, True)  # the program holds the lock for its life
    env = dict(ENV, HOME="/")
    if service.user is not None:
        from agentc.files.accounts import become, unprivileged_account

        become(unprivileged_account(service.user, f"the {name} service's account"))
    else:
        env["HOME"] = pwd.getpwuid(0).pw_dir
    os.execve(service.argv[0], list(service.argv), env)  # noqa: S606 - our own program


class Manager(Protocol):
    def is_active(self, name: str) -> bool: ...
    def start(self, name: str) -> None: ...
    def stop(self, name: str, timeout: float = STOP_SECONDS) -> None: ...


class Systemd:
    def __init__(self, settings: HostSettings) -> None:
        self.units = {s.name: s.unit for s in services.services(settings).values()}

    def _run(self, *args: str) -> int:
        return run_check(["systemctl", *args], env=ENV, timeout=STOP_SECONDS + 60).returncode

    def is_active(self, name: str) -> bool:
        return self._run("is-active", "--quiet", self.units[name]) == 0

    def start(self, name: str) -> None:
        if self._run("start", self.units[name]) != 0:
            raise ConfigError(f"systemctl start {self.units[name]} failed")

    def stop(self, name: str, timeout: float = STOP_SECONDS) -> None:
        if self._run("stop", self.units[name]) != 0:
            raise ConfigError(f"systemctl stop {self.units[name]} failed")


class Cron:
    def __init__(self, settings: HostSettings, settings_path: Path | None = None) -> None:
        self.settings = settings
        self.command = services.host_command(settings_path, settings.bin_dir).split()

    def is_active(self, name: str) -> bool:
        return locks.held(lock_path(self.settings, name))

    def holders(self, name: str) -> list[int]:
        """The processes holding the service's lock file open."""
        lock = str(lock_path(self.settings, name))
        found: list[int] = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):
                fds = Path(f"/proc/{entry}/fd")
                if any(os.readlink(fds / fd) == lock for fd in os.listdir(fds)):
                    found.append(int(entry))
        return found

    def start(self, name: str) -> None:
        log_path = self.settings.log_dir / f"agentc-{name}.log"
        with open(log_path, "ab") as log:
            os.chmod(log_path, 0o600)
            # Apart from us, as cron runs it: the shell leaves it running and exits.
            argv = ["/bin/sh", "-c", '"$@" &', "sh", *self.command, "service", name]
            start_detached(argv, dict(ENV), log).wait()
        deadline = time.monotonic() + START_SECONDS
        while not self.is_active(name):
            if time.monotonic() > deadline:
                raise ConfigError(f"the {name} service did not start (see {log_path})")
            time.sleep(0.1)

    def stop(self, name: str, timeout: float = STOP_SECONDS) -> None:
        pids = self.holders(name)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.is_active(name) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in self.holders(name):  # past the timeout: it and its process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.is_active(name) and time.monotonic() < deadline:
            time.sleep(0.1)


def manager(settings: HostSettings, init: str, settings_path: Path | None) -> Manager:
    return Systemd(settings) if init == "systemd" else Cron(settings, settings_path)
