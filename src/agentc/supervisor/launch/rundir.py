"""Run directory layout and its markers, created fresh and never through a symlink.

``$RUN = <state>/<role slug>/runs/<run>`` holds ``prompt.md`` (written before the launch),
the private per-launch trees (``state/home``, ``state/cargo``, ``state/coordinator``,
``tmp``, ``target``, ``net``; reviewers also ``candidate-home`` and ``candidate-tmp``, and the
generated ``candidate-shell`` (Claude) or ``candidate-run`` (``command:``)) and
the markers: ``.state-started`` before spawn, ``.state-terminal.json`` after the harness
exited and every leftover process was reaped, ``events.jsonl`` and ``stderr.log`` for the
harness's output. Each marker is created new with mode 0600 (``O_EXCL|O_NOFOLLOW``), so a
started run can never be reused and a planted symlink is never followed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from agentc.core.errors import SupervisorError
from agentc.core.roles import Role, role_slug

MARKERS = (
    ".state-started",
    ".state-terminal.json",
    "events.jsonl",
    "stderr.log",
    "candidate-shell",
    "candidate-run",
)


class RunLayout:
    """The paths of one launch, derived from the state root, the role and the two dirs."""

    def __init__(self, state_dir: Path, role: Role, run: Path, clone: Path) -> None:
        self.state_dir = state_dir
        self.role = role
        self.run = run
        self.clone = clone
        self.role_dir = state_dir / role_slug(role)
        self.runs = self.role_dir / "runs"
        self.clones = self.role_dir / "clones"
        self.claude_config = self.role_dir / "claude-config"
        self.token_file = self.role_dir / "claude-token"
        self.prompt = run / "prompt.md"
        self.net = run / "net"

    @classmethod
    def of_launch(cls, state_dir: Path, role: Role, launch_id: str) -> RunLayout:
        """A loop launch's layout: ``<state>/<slug>/runs/<id>`` and ``.../clones/<id>``."""
        state = Path(os.path.realpath(state_dir))
        slug = state / role_slug(role)
        return cls(state, role, slug / "runs" / launch_id, slug / "clones" / launch_id)

    def private_dirs(self) -> list[Path]:
        """Per-launch trees the harness may write, in creation order."""
        dirs = [
            self.run / "state",
            self.run / "state/home",
            self.run / "state/cargo",
            self.run / "state/coordinator",
            self.run / "state/codex-home",
            self.run / "tmp",
            self.run / "target",
            self.net,
        ]
        if self.role == "reviewer":
            dirs += [self.run / "candidate-home", self.run / "candidate-tmp"]
        return dirs

    def writable_dirs(self) -> list[Path]:
        """The private dirs bound writable into the sandbox (``state/`` itself stays read-only
        so an agent cannot rename the trees around their mounts)."""
        skip = {self.run / "state", self.net}
        return [d for d in self.private_dirs() if d not in skip]


def check_canonical_child(path: Path, parent: Path, what: str) -> None:
    """``path`` must be an existing real directory directly inside ``parent``; no symlinks."""
    if not path.is_absolute():
        raise SupervisorError(f"{what} {path} must be an absolute path")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise SupervisorError(f"{what} {path} does not exist") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SupervisorError(f"{what} {path} must be a real directory, not a symlink")
    if os.path.realpath(path) != str(path) or path.parent != parent:
        raise SupervisorError(f"{what} {path} must be a canonical path directly in {parent}")


def check_fresh(layout: RunLayout) -> None:
    """Refuse a run directory that was ever started: a started run is never reused."""
    for name in MARKERS:
        if os.path.lexists(layout.run / name):
            raise SupervisorError(
                f"{layout.run}: {name} exists; this run was already started, "
                "use a fresh run directory"
            )


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` with mode 0700, or accept an existing real directory we own."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise SupervisorError(f"{path} must be a real directory, not a symlink") from None
        if info.st_uid != os.getuid():
            raise SupervisorError(f"{path} is owned by uid {info.st_uid}, not us") from None
    os.chmod(path, 0o700, follow_symlinks=False)


def create_new(path: Path, mode: int = 0o600) -> int:
    """Open a brand-new file for writing; an existing file or a symlink is refused."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        raise SupervisorError(f"{path} already exists; refusing to reuse it") from None
    except OSError as exc:
        raise SupervisorError(f"cannot create {path} ({exc.strerror})") from None
    os.fchmod(fd, mode)  # the umask must not widen or narrow the documented mode
    return fd


def write_new_json(path: Path, data: dict[str, Any]) -> None:
    fd = create_new(path)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())


def prepare(layout: RunLayout) -> None:
    """Create the private per-launch trees (idempotent until the run is started)."""
    for path in layout.private_dirs():
        ensure_private_dir(path)


def remove_trees(*paths: Path) -> None:
    """Remove each path: a symlink is unlinked (never followed), a directory removed."""
    for path in paths:
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
