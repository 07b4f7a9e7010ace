"""Starting the candidate push helper of one implementer launch (``agentc-push``, docs/push.md).

The supervisor's loop starts one beside each implementer launch, and ``agentc-host check``
beside its containment launch, through this module: the helper's own package holds the flags
it is started with, the directory it serves from and the record of pushes it writes.

The launch holds no push credential. Before it starts, the loop makes a per-launch directory
``<state>/push/<id>/`` (always under the state root, never in a shared directory such as
``/tmp`` where another account could make the path first: a socket path too long for
``sun_path`` is bound and reached through its directory, :mod:`agentc.files.sockets`) holding
``sock/`` (the socket ``s``), ``work/`` (the helper's home and private repository) and ``log`` (the
helper's output, the loop's own), holds an exclusive lock on ``<id>.lock`` for the launch's
life, and binds ``sock/`` read-only into the launch, whose agent CLI finds the socket as
``AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET``. In personal mode all of it is the user's, 0700.
In host mode (the loop is root) the base and ``<id>/`` are root 0711, ``sock/`` is the push
account's with the implementer's group, 2750 (the socket, 0660, takes that group: only the
push account, the implementer account and root reach it), ``work/`` the push account's 0700,
and the helper runs as the push account (``[push_helper] user``), switched with
:func:`agentc.files.accounts.become`. Once the sandbox runs, the loop starts the helper
with only PATH, LANG and HOME (and PYTHONPATH when agentc runs from a source tree), serving
that socket for that launch's processes alone (its ``--parent-pid`` is the sandbox's root) and
refusing a push that carries the launch's coordinator token (matched by digest, in every
encoding the scan decodes) or a common secret format, and WIP refs past the launch's quota
(``[push_helper] wip_max_refs``, ``wip_max_mib``). When the
launch ends the helper gets SIGTERM, SIGKILL after :data:`STOP_SECONDS`, and its directory and
private repository are removed; if the loop dies the helper dies with it (parent-death
signal). Each new launch first sweeps, under ``<base>/.sweep`` locked, every directory whose
lock no running loop holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentc.core.errors import AgentcError, SupervisorError
from agentc.core.secrets import verifier
from agentc.files import load_toml, locks, read_tail
from agentc.files.accounts import become
from agentc.files.procs import SYSTEM_PATH, start_detached
from agentc.push.protocol import WIP_MAX_MIB, WIP_MAX_REFS

STOP_SECONDS = 5.0
SOCKET_NAME = "s"
SOCKET_DIR = "sock"
_ID_CHARS = 12


def base_dir(state: Path) -> Path:
    """Where the per-launch directories live for this state root: ``<state>/push``, whatever
    the state path's length."""
    return state / "push"


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def sweep(base: Path) -> list[str]:
    """Remove every per-launch directory no running launch holds; returns their names."""
    swept: list[str] = []
    with _sweep_lock(base):
        for entry in sorted(base.iterdir()):
            if entry.name.startswith(".") or entry.suffix == ".lock":
                continue
            lock = base / f"{entry.name}.lock"
            if locks.held(lock):
                continue
            _remove(entry)
            lock.unlink(missing_ok=True)
            swept.append(entry.name)
    return swept


@contextlib.contextmanager
def _sweep_lock(base: Path) -> Iterator[None]:
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    if base.is_symlink() or base.stat().st_uid != os.getuid():
        raise SupervisorError(f"{base}: the push directory must be ours and not a link")
    with locks.locked(base / ".sweep"):
        yield


def token_digests(credential_file: Path) -> list[str]:
    """The verifiers (SHA-256 digests) of every token in a client credentials file (none when
    unreadable)."""
    try:
        data = load_toml(credential_file, what="credentials")
    except (OSError, ValueError, AgentcError):  # the loop already read it; the scan runs without
        return []
    entries = data.get("credentials", [])
    tokens = [e.get("token") for e in entries if isinstance(e, dict)]
    return [verifier(t) for t in tokens if isinstance(t, str) and t]


def _plain_file(key: str, path: Path) -> os.stat_result | str:
    """The file's own status (a link is not followed), or why it is not a regular file with
    one link (the problem, naming the setting ``key``)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"{key} {path}: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        return f"{key} {path} must be a regular file with one link, not a link"
    return info


def key_problems(key: Path, account: pwd.struct_passwd) -> list[str]:
    """The remote credential (``--ssh-key``) is a regular single-link file of ``account``'s
    that no one else may read or write (it is opened without following a link)."""
    info = _plain_file("push_helper.ssh_key", key)
    if isinstance(info, str):
        return [info]
    problems = []
    if info.st_uid != account.pw_uid:
        problems.append(
            f"push_helper.ssh_key {key} is owned by uid {info.st_uid}, not by the push "
            f"helper's account {account.pw_name} (fix: chown {account.pw_name} {key})"
        )
    if info.st_mode & 0o077:
        problems.append(
            f"push_helper.ssh_key {key} has mode {info.st_mode & 0o777:04o}: only "
            f"{account.pw_name} may read it (fix: chmod 0400 {key})"
        )
    return problems


def known_hosts_problems(path: Path, account: pwd.struct_passwd) -> list[str]:
    """The ssh remote's host keys: a regular single-link file the helper's account can read
    and that no one but its owner (root or that account) may change."""
    info = _plain_file("push_helper.known_hosts", path)
    if isinstance(info, str):
        return [info]
    problems = []
    if info.st_uid not in (0, account.pw_uid):
        problems.append(
            f"push_helper.known_hosts {path} is owned by uid {info.st_uid}: root or "
            f"{account.pw_name} must own it (fix: chown root {path})"
        )
    if info.st_mode & 0o022:
        problems.append(
            f"push_helper.known_hosts {path} has mode {info.st_mode & 0o777:04o}: no one but "
            f"its owner may change it (fix: chmod 0644 {path})"
        )
    return problems


@dataclass
class PushHelper:
    """One launch's helper: its directory (``sock/`` bound into the launch), then its process;
    ``account`` is host mode's push account (None: the helper runs as the loop)."""

    base: Path
    name: str
    lock_fd: int
    account: pwd.struct_passwd | None = None
    proc: subprocess.Popen[bytes] | None = None
    notes: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # its pushes, read at the stop

    @property
    def directory(self) -> Path:
        return self.base / self.name

    @property
    def socket(self) -> Path:
        return self.directory / SOCKET_DIR / SOCKET_NAME

    @property
    def work(self) -> Path:
        return self.directory / "work"

    @property
    def log_path(self) -> Path:
        return self.directory / "log"

    @property
    def events_path(self) -> Path:
        """The helper's own record of each push (in ``work/``: the helper's, not the launch's)."""
        return self.work / "events.jsonl"

    @classmethod
    def prepare(
        cls,
        state: Path,
        launch_id: str,
        *,
        group: int | None = None,
        account: pwd.struct_passwd | None = None,
    ) -> PushHelper:
        """Sweep stale directories, then make and lock this launch's (before the launch).

        Host mode (the loop is root) gives ``account`` (the push account) and ``group`` (the
        implementer account's group): the base and the launch's directory are root 0711,
        ``sock/`` ``account``:``group`` 2750 (so the socket the helper binds there, mode 0660,
        takes that group: the push and implementer accounts reach it, no other account does)
        and ``work/`` the push account's 0700."""
        if (group is None) != (account is None):
            raise SupervisorError("host mode's push helper needs both its account and a group")
        base = base_dir(state)
        sweep(base)
        name = launch_id.replace("-", "")[:_ID_CHARS]
        with _sweep_lock(base):
            helper = cls(base, name, locks.wait(base / f"{name}.lock"), account)
            helper.directory.mkdir(mode=0o700)
            helper.socket.parent.mkdir(mode=0o700)
            helper.work.mkdir(mode=0o700)
            if account is not None and group is not None:
                os.chmod(base, 0o711, follow_symlinks=False)  # noqa: S103 - traversable only
                os.chmod(helper.directory, 0o711, follow_symlinks=False)  # noqa: S103 - same
                sock = helper.socket.parent
                os.chown(sock, account.pw_uid, group, follow_symlinks=False)
                os.chmod(sock, 0o2750, follow_symlinks=False)  # noqa: S103 - the group
                os.chown(helper.work, account.pw_uid, account.pw_gid, follow_symlinks=False)
        return helper

    def start(
        self,
        *,
        parent_pid: int,
        task: str,
        launch: str,
        remote: str,
        digests: list[str],
        program: list[str] | None = None,
        ssh_key: Path | None = None,
        known_hosts: Path | None = None,
        wip_quota: tuple[int, int] = (WIP_MAX_REFS, WIP_MAX_MIB),
    ) -> None:
        """Start ``agentc-push serve`` (``program``, default this interpreter's ``-m
        agentc.push.cli``) for the running launch, as the push account in host mode (the
        launch's CLI waits for its socket); ``wip_quota`` is the launch's WIP refs and MiB."""
        argv = [*(program or [sys.executable, "-m", "agentc.push.cli"])]
        argv += ["serve", f"--socket={self.socket}"]
        argv += [f"--task={task}", f"--launch={launch}", f"--work-dir={self.work / 'repo'}"]
        argv += [f"--remote={remote}", f"--parent-pid={parent_pid}"]
        argv += [f"--known-digest={d}" for d in digests]
        argv += [f"--wip-max-refs={wip_quota[0]}", f"--wip-max-mib={wip_quota[1]}"]
        argv.append(f"--events={self.events_path}")
        if ssh_key is not None:
            argv.append(f"--ssh-key={ssh_key}")
            if known_hosts is not None:
                argv.append(f"--known-hosts={known_hosts}")
        env = {
            "PATH": os.environ.get("PATH", SYSTEM_PATH),
            "LANG": "C.UTF-8",
            "HOME": str(self.work),
        }
        if os.environ.get("PYTHONPATH"):  # agentc run from a source tree
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        account = self.account
        switch = None if account is None else lambda: become(account)
        # The log is the loop's (root's in host mode), beside work/, not in it.
        fd = os.open(
            self.log_path,
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        with os.fdopen(fd, "ab") as log:
            self.proc = start_detached(argv, env, log, switch)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after :data:`STOP_SECONDS`; remove the directory; drop the lock."""
        proc = self.proc
        early = proc is not None and proc.poll() is not None
        if proc is not None and early:
            self.notes.append(f"the candidate push helper had exited early ({proc.returncode})")
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.notes.append("the candidate push helper did not stop in time: killed")
                proc.kill()
                proc.wait()
        self.events = read_events(self.events_path)
        failed = early or (proc is not None and proc.returncode not in (0, -15))
        if failed:
            with contextlib.suppress(OSError):
                tail = self.log_path.read_text(errors="replace")[-600:].strip()
                if tail:
                    self.notes.append(f"agentc-push said: {tail}")
        _remove(self.directory)
        (self.base / f"{self.name}.lock").unlink(missing_ok=True)
        os.close(self.lock_fd)


def read_events(path: Path, limit: int = 1 << 20) -> list[dict[str, Any]]:
    """The helper's push events (the last ``limit`` bytes; a file that is not a regular one of
    its own, or a line that is not JSON, is skipped)."""
    try:
        raw = read_tail(path, limit)
    except OSError:
        return []
    events = []
    for line in raw.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "push":
            events.append(event)
    return events
