"""The candidate push helper of one implementer launch (``agentc-push``, docs/push.md).

The launch holds no push credential. Before it starts, the loop makes a per-launch directory ``<push
base>/<id>/`` (mode 0700; the base is ``<state>/push``, or a short directory under ``/tmp``
named after the state root when that path would be too long for a Unix socket), holds an
exclusive lock on ``<id>.lock`` for the launch's life, and binds the directory read-only into
the launch, whose agent CLI finds the socket as ``AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET``.
Once the sandbox runs, the loop starts the helper with only PATH, LANG and HOME (and PYTHONPATH
when agentc runs from a source tree), serving that socket for that launch's processes alone (its
``--parent-pid`` is the sandbox's root) and refusing a candidate that carries the launch's
coordinator token (matched by digest). When the launch ends the helper gets SIGTERM, SIGKILL
after :data:`STOP_SECONDS`, and its directory and private repository are removed; if the loop
dies the helper dies with it (parent-death signal). Each new launch first sweeps, under
``<base>/.sweep`` locked, every directory whose lock no running loop holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agentc.core.errors import AgentcError, SupervisorError
from agentc.files import load_toml

STOP_SECONDS = 5.0
SOCKET_NAME = "s"
# agentc.push.server.MAX_SOCKET_PATH: the helper binds a temporary name next to the socket.
MAX_SOCKET_PATH = 93
_ID_CHARS = 12


def base_dir(state: Path) -> Path:
    """Where the per-launch directories live for this state root."""
    base = state / "push"
    longest = base / ("x" * _ID_CHARS) / SOCKET_NAME
    if len(os.fsencode(str(longest))) <= MAX_SOCKET_PATH:
        return base
    digest = hashlib.sha256(os.fsencode(str(state))).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"agentc-push-{os.getuid()}-{digest}"


def _locked(path: Path) -> bool:
    """Whether another open file description holds ``path``'s lock (a running launch's)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


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
            if _locked(lock):
                continue
            _remove(entry)
            _remove(base / f"{entry.name}.work")
            lock.unlink(missing_ok=True)
            swept.append(entry.name)
    return swept


@contextlib.contextmanager
def _sweep_lock(base: Path) -> Iterator[None]:
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    if base.is_symlink() or base.stat().st_uid != os.getuid():
        raise SupervisorError(f"{base}: the push directory must be ours and not a link")
    fd = os.open(base / ".sweep", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def token_digests(credential_file: Path) -> list[str]:
    """SHA-256 digests of every token in a client credentials file (none when unreadable)."""
    try:
        data = load_toml(credential_file, what="credentials")
    except (OSError, ValueError, AgentcError):  # the loop already read it; the scan runs without
        return []
    entries = data.get("credentials", [])
    tokens = [e.get("token") for e in entries if isinstance(e, dict)]
    return [hashlib.sha256(t.encode()).hexdigest() for t in tokens if isinstance(t, str) and t]


@dataclass
class PushHelper:
    """One launch's helper: its directory (bound into the launch), then its process."""

    base: Path
    name: str
    lock_fd: int
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def directory(self) -> Path:
        return self.base / self.name

    @property
    def socket(self) -> Path:
        return self.directory / SOCKET_NAME

    @property
    def work(self) -> Path:
        return self.base / f"{self.name}.work"

    @classmethod
    def prepare(cls, state: Path, launch_id: str, *, group: int | None = None) -> PushHelper:
        """Sweep stale directories, then make and lock this launch's (before the launch).

        With ``group`` (host mode: the implementer account's group; the loop is root) the base
        is mode 0711 and the launch's directory root:``group`` mode 2750, so the socket the
        helper binds there (mode 0660) takes that group: the implementer account can reach it,
        no other account can."""
        base = base_dir(state)
        sweep(base)
        name = launch_id.replace("-", "")[:_ID_CHARS]
        with _sweep_lock(base):
            lock = base / f"{name}.lock"
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            helper = cls(base, name, fd)
            helper.directory.mkdir(mode=0o700)
            helper.work.mkdir(mode=0o700)
            if group is not None:
                os.chmod(base, 0o711, follow_symlinks=False)  # noqa: S103 - traversable only
                os.chown(helper.directory, 0, group, follow_symlinks=False)
                os.chmod(helper.directory, 0o2750, follow_symlinks=False)  # noqa: S103 - the group
        return helper

    def start(
        self, *, parent_pid: int, task: str, launch: str, remote: str, digests: list[str]
    ) -> None:
        """Start ``agentc-push serve`` for the running launch (the launch's CLI waits for its
        socket)."""
        argv = [sys.executable, "-m", "agentc.push.cli", "serve", f"--socket={self.socket}"]
        argv += [f"--task={task}", f"--launch={launch}", f"--work-dir={self.work / 'repo'}"]
        argv += [f"--remote={remote}", f"--parent-pid={parent_pid}"]
        argv += [f"--known-digest={d}" for d in digests]
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.work),
        }
        if os.environ.get("PYTHONPATH"):  # agentc run from a source tree
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        self.log_path = self.work / "helper.log"
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

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
        failed = early or (proc is not None and proc.returncode not in (0, -15))
        if failed and self.log_path is not None:
            with contextlib.suppress(OSError):
                tail = self.log_path.read_text(errors="replace")[-600:].strip()
                if tail:
                    self.notes.append(f"agentc-push said: {tail}")
        _remove(self.directory)
        _remove(self.work)
        (self.base / f"{self.name}.lock").unlink(missing_ok=True)
        os.close(self.lock_fd)
