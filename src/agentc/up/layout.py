"""Where ``agentc up`` keeps everything: one state directory (default ``./.agentc``).

```
.agentc/                  0700, the user's own (`agentc up` refuses another account's)
  coordinator.sqlite3     the coordinator's database
  admin-password          the first admin's password (0600)
  up.json                 the project, port, harness and console address (its own name,
                          ``http://agentc-<random>.localhost:PORT``), the running ``up``'s pid
  up.lock                 held by the running ``up`` (flock): a second one is refused
  credentials/            one client credentials file per role (0600): implementer,
                          reviewer, integrator, status (read-only)
  remote.git              the project's repository: candidates and landings go here
                          (core.sharedRepository 0600: private whoever writes it)
  egress/proxy.sock       the egress proxy's socket (only the user's relays reach it)
  gateway/                the model gateway's settings, credential and control socket
  launch-logs/            one event log per launch (the gateway, the egress proxy, the loop)
  supervisor.toml         the supervisor loop's configuration (personal mode)
  supervisor/             the loop's state (mirror, runs, clones, records, heartbeat)
  integrator.toml         the integrator's configuration
  integrator/             the integrator's private repository, journal and reports
  signing/                the integrator's SSH signing key (0600) and `allowed_signers`, which
                          verifies the commits it lands (docs/integrator.md, "Signatures")
  logs/                   one log per process
```

The whole directory is masked inside every launch and every check: no agent sees another
role's credential. It is private to the user: ``agentc up`` makes it 0700 (an existing one
too) and runs with umask 077, so nothing in it is readable by another local account.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.client.config import credential_text
from agentc.core.errors import ConfigError
from agentc.files import UnsafeFile, locks, read_private, write_atomic

ROLES = ("implementer", "reviewer", "integrator", "status")


class _Under:
    """A path of the layout: ``name`` under its root."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, layout: Layout, _owner: type[Layout] | None = None) -> Path:
        return layout.root / self.name


@dataclass(frozen=True)
class Layout:
    root: Path

    database = _Under("coordinator.sqlite3")
    admin_password = _Under("admin-password")
    record = _Under("up.json")
    lock = _Under("up.lock")
    remote = _Under("remote.git")
    supervisor_config = _Under("supervisor.toml")
    supervisor_state = _Under("supervisor")
    integrator_config = _Under("integrator.toml")
    integrator_state = _Under("integrator")
    signing = _Under("signing")
    egress_socket = _Under("egress/proxy.sock")
    launch_logs = _Under("launch-logs")
    attention_config = _Under("attention.toml")
    attention_state = _Under("attention")

    def credential(self, role: str) -> Path:
        """A client credentials file; the integrator's and attention's are bare token files
        (docs/integrator.md, docs/attention.md)."""
        suffix = "token" if role in ("integrator", "attention") else "toml"
        return self.root / "credentials" / f"{role}.{suffix}"

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    # -- the record ---------------------------------------------------------------------------

    def read_record(self) -> dict[str, Any] | None:
        """``up.json``, or None before the first ``up`` finished setting up."""
        if not os.path.lexists(self.record):
            return None
        try:
            raw = read_private(self.record, max_bytes=64 * 1024)
        except (OSError, UnsafeFile) as exc:
            raise ConfigError(f"{self.record}: cannot read it ({exc})") from None
        try:
            data = json.loads(raw)
        except ValueError:
            raise ConfigError(f"{self.record}: not JSON; remove it to set up again") from None
        if not isinstance(data, dict) or not isinstance(data.get("project_id"), str):
            raise ConfigError(f"{self.record}: no project_id; remove it to set up again")
        return data

    def write_record(self, data: dict[str, Any]) -> None:
        write_atomic(self.record, (json.dumps(data, indent=2) + "\n").encode(), mode=0o600)

    def running_pid(self) -> int | None:
        """The pid of the ``up`` running on this state directory (the holder of its lock), if
        one runs."""
        return locks.holder(self.lock)

    def hold(self) -> int:
        """This ``up``'s lock of the state directory (made already): the descriptor to keep
        open while it runs; refused, naming the other's pid, while another ``up`` holds it."""
        fd = locks.hold(self.lock)
        if fd is None:
            other = locks.holder(self.lock)
            who = f"pid {other}" if other is not None else f"it holds {self.lock}"
            raise ConfigError(
                f"agentc up already runs on {self.root} ({who}): stop it first (Ctrl-C in its "
                "terminal), or use another --state-dir"
            )
        return fd


def write_credential(path: Path, origin: str, token: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = (token + "\n").encode() if path.suffix == ".token" else credential_text(origin, token)
    write_atomic(path, data, mode=0o600)


def check_owner(root: Path) -> None:
    """Refuse, before anything is written, a state directory that is not this user's own
    directory (it would hold the credentials where its owner can read or replace them)."""
    try:
        info = os.stat(root)  # --state-dir may name a link to the user's directory
    except FileNotFoundError:
        return  # made 0700 by make_private
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"--state-dir {root}: not a directory")
    if info.st_uid != os.geteuid():
        raise ConfigError(
            f"--state-dir {root}: the directory belongs to uid {info.st_uid}, not to you; "
            "agentc up keeps credentials there and must own it: choose a directory of your own"
        )


def make_private(root: Path) -> None:
    """Make the state directory (checked by :func:`check_owner`) 0700, an existing one too."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root, 0o700)


def check_writable(root: Path) -> None:
    """Refuse, before anything is created, a state directory we cannot make or write."""
    probe = root if root.exists() else next((p for p in root.parents if p.exists()), Path("/"))
    if probe.exists() and not probe.is_dir():
        raise ConfigError(f"--state-dir {root}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"--state-dir {root}: {probe} is not writable by this user")
