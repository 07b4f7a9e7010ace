"""The off-server copy: the newest verified snapshot copied to a destination folder on other
storage (a mounted remote file system), verified there, then recorded.

An advisory lock on the destination (``.copy.lock``, `flock`) makes two copies to it never
interleave: the second is refused while the first runs. The copy is written under a temporary
name, synced and renamed; then the destination's own file is read back whole and checked as
the backup checks a snapshot (checksum, integrity, migration stamp, row counts) before its
manifest entry is written beside it (so the destination is itself a repository `restore` can
read) and the source repository's ``offsite.json`` records it. Until one copy has passed,
`backup-status` says "no host-loss protection".
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agentc.core.errors import ConfigError
from agentc.files import locks
from agentc.service import backup, snapshots


@contextlib.contextmanager
def _locked(destination: Path) -> Iterator[None]:
    with locks.holding(destination / ".copy.lock") as held:
        if not held:
            raise ConfigError(
                f"--destination: another copy to {destination} is running; try again later"
            )
        yield


def copy_newest(repository: Path, destination: Path) -> dict[str, Any]:
    found = backup.entries(repository)
    if not found:
        raise ConfigError("the repository holds no verified snapshot to copy; run backup first")
    entry = backup.find(repository, found[-1].id)  # its checksum checked again
    dest = backup.open_repository(destination, create=True)
    if dest == repository:
        raise ConfigError("--destination is the repository itself")
    with _locked(dest):
        target = dest / entry.file
        partial = dest / f"{entry.id}.partial"
        try:
            _copy(entry.path(repository), partial)
            if snapshots.checksum(partial) != entry.sha256:
                raise ConfigError(f"the copy at {partial} does not match the snapshot's checksum")
            snapshots.check(entry.backend, partial, entry.migration, entry.rows)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        backup.write_json(dest / f"{entry.id}.json", asdict(entry))
    record = {
        "snapshot": entry.id,
        "destination": str(dest),
        "sha256": entry.sha256,
        "size": entry.size,
        "verified_at": backup.now_ms(),
    }
    backup.write_json(repository / "offsite.json", record)
    return record


def _copy(source: Path, target: Path) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        shutil.copyfileobj(src, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
