"""The host's four accounts: checked by host mode's own rules, made with ``useradd``, retired by
``--uninstall``.

An account setup makes is a system account with a group of its own, no login shell and no home
made (a role's home is its ``<state>/<role>/home``, which setup lays out). An account that
already exists is used only if host mode would accept it
(:func:`agentc.files.accounts.named_account_problems`) and it has no login
shell; setup never changes an account it did not make, and ``--uninstall`` retires only those it
made: every process running under it is killed, its crontab and its files in the shared
temporary directories are removed (a symlink itself, never its target), then the account and
its group are deleted.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import stat
import time
from pathlib import Path

from agentc.core.errors import ConfigError
from agentc.files.accounts import named_account_problems
from agentc.files.procs import run_check
from agentc.host.plan import Account

NO_LOGIN = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false")
SHARED_TEMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))  # noqa: S108
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}
TIMEOUT = 60.0


def problems(accounts: list[Account]) -> list[str]:
    """Why an existing account cannot be used (missing ones are made)."""
    found = named_account_problems([(a.who, a.name) for a in accounts], missing_ok=True)
    for account in accounts:
        try:
            entry = pwd.getpwnam(account.name)
        except KeyError:
            continue
        if entry.pw_shell not in NO_LOGIN:
            found.append(
                f"the {account.who}'s account {account.name} has the login shell "
                f"{entry.pw_shell} (fix: usermod --shell /usr/sbin/nologin {account.name}, "
                "or name another account in host.toml [accounts])"
            )
    return found


def no_login_shell() -> str:
    return next((shell for shell in NO_LOGIN if os.path.exists(shell)), "/bin/false")


def useradd_argv(account: Account) -> list[str]:
    return [
        "useradd", "--system", "--user-group", "--no-create-home",
        "--home-dir", str(account.home), "--shell", no_login_shell(), account.name,
    ]  # fmt: skip


def create(account: Account) -> None:
    done = run_check(useradd_argv(account), env=ENV, timeout=TIMEOUT)
    if done.returncode != 0:
        raise ConfigError(f"useradd {account.name} failed: {done.stderr.strip()[:300]}")


def retire(name: str) -> list[str]:
    """Retire the account setup made; a line for anything that could not be done."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return []
    left: list[str] = []
    uid = entry.pw_uid
    if uid == 0:
        return [f"{name} is root: not retired"]
    _kill_all(uid)
    if _running(uid):
        left.append(f"processes of {name} still run after SIGKILL")
    if shutil.which("crontab", path=ENV["PATH"]):  # no cron: no crontab
        run_check(["crontab", "-r", "-u", name], env=ENV, timeout=TIMEOUT)  # none is fine
    for base in SHARED_TEMP:
        left += _remove_owned(base, uid)
    done = run_check(["userdel", name], env=ENV, timeout=TIMEOUT)
    if done.returncode != 0:
        left.append(f"userdel {name} failed: {done.stderr.strip()[:200]}")
    with contextlib.suppress(KeyError):
        grp.getgrnam(name)
        run_check(["groupdel", name], env=ENV, timeout=TIMEOUT)
    return left


def processes_of(uid: int) -> list[int]:
    """Every process whose real or effective uid is ``uid``."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:"):
                ids = [int(v) for v in line.split()[1:3]]
                if uid in ids:
                    found.append(int(entry))
                break
    return found


def _running(uid: int) -> bool:
    return any(_alive(pid) for pid in processes_of(uid))


def _alive(pid: int) -> bool:
    """Running (not an exited process waiting to be reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _kill_all(uid: int) -> None:
    for _ in range(20):  # a forking process may spawn between two scans
        pids = [pid for pid in processes_of(uid) if _alive(pid)]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _remove_owned(base: Path, uid: int) -> list[str]:
    """Remove what ``uid`` owns directly in ``base`` (a directory with its whole tree; a
    symlink itself)."""
    left: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return left
    for name in names:
        path = base / name
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if info.st_uid != uid:
            continue
        try:
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(path)  # never follows a symlink inside
            else:
                os.unlink(path)
        except OSError as exc:
            left.append(f"{path}: not removed ({exc})")
    return left
