"""The backup repository: verified snapshots, their manifest entries, retention, status.

A repository is a private folder (mode 0700, the service account's) holding, per snapshot,
``<id>.sqlite3`` or ``<id>.pgdump`` (mode 0600) and its manifest entry ``<id>.json`` (0600),
written only once the snapshot has verified; a snapshot without its entry is not a backup.
``offsite.json`` records the newest off-server copy that passed destination-side
verification (:mod:`agentc.service.offsite`) and ``exercise.json`` the last recovery exercise.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentc.core.errors import ConfigError
from agentc.core.rules import rfc3339
from agentc.files import UnsafeFile, read_private, write_atomic
from agentc.service import snapshots
from agentc.store.engine import Database

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
SUFFIX = {"sqlite": ".sqlite3", "postgresql": ".pgdump"}
MAX_AGE_HOURS = 2.0  # older than this, a snapshot or off-server copy is stale
NO_HOST_LOSS = "no host-loss protection: no off-server copy has passed destination verification"
NOT_CONFIGURED = (
    "no backup repository is configured: set COORDINATOR_BACKUP_REPOSITORY (the service's "
    "--backup-repository) to the folder the backup timer writes"
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Entry:
    """A verified snapshot's manifest entry."""

    id: str
    backend: str  # sqlite | postgresql
    file: str
    created_at: int
    verified_at: int
    size: int
    sha256: str
    migration: str
    rows: dict[str, int]

    def path(self, repository: Path) -> Path:
        return repository / self.file


def open_repository(path: Path, *, create: bool) -> Path:
    """The repository folder, made 0700 when create; refused unless private and ours."""
    path = path.expanduser().absolute()
    if create and not path.exists():
        if not path.parent.is_dir():
            raise ConfigError(f"--repository: the folder {path.parent} does not exist")
        path.mkdir(mode=0o700)
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ConfigError(f"--repository: {path} does not exist") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"--repository: {path} is not a folder")
    if info.st_uid != os.geteuid():
        raise ConfigError(f"--repository: {path} belongs to uid {info.st_uid}, not to you")
    if info.st_mode & 0o077:
        raise ConfigError(
            f"--repository: {path} has mode {stat.S_IMODE(info.st_mode):04o}; snapshots hold "
            f"credential verifiers: chmod 0700 {path}"
        )
    return path


def new_id(at_ms: int) -> str:
    stamp = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def backend_of(db: Database) -> str:
    return "sqlite" if db.is_sqlite else "postgresql"


def backup(db: Database, repository: Path) -> Entry:
    """Take a snapshot of db into the repository, verify it and record its manifest entry;
    a snapshot that does not verify is removed and nothing is recorded."""
    created = now_ms()
    ident, backend = new_id(created), backend_of(db)
    partial = repository / f"{ident}.partial"
    final = repository / f"{ident}{SUFFIX[backend]}"
    try:
        stamp, rows = snapshots.take(db, partial)
        snapshots.check(backend, partial, stamp, rows)
        os.replace(partial, final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    entry = Entry(
        ident,
        backend,
        final.name,
        created,
        now_ms(),
        final.stat().st_size,
        snapshots.checksum(final),
        stamp,
        rows,
    )
    write_json(repository / f"{ident}.json", asdict(entry))
    return entry


def write_json(path: Path, value: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(value, indent=1, sort_keys=True) + "\n").encode(), mode=0o600)


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(read_private(path, max_bytes=1 << 20))
    except UnsafeFile as exc:
        raise ConfigError(str(exc)) from None
    except ValueError as exc:
        raise ConfigError(f"{path} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} is not a JSON object")
    return value


def entries(repository: Path) -> list[Entry]:
    """Every verified snapshot of the repository whose file is there, oldest first."""
    found = []
    for path in repository.glob("*.json"):
        if path.name in ("offsite.json", "exercise.json"):
            continue
        try:
            entry = _entry(read_json(path))
        except (ValueError, TypeError, ConfigError):
            entry = None
        if entry is None or path.name != f"{entry.id}.json":
            continue  # not a manifest entry: ignored, never deleted
        if entry.path(repository).is_file():
            found.append(entry)
    return sorted(found, key=lambda e: (e.created_at, e.id))


_ENTRY_TYPES: dict[str, type | tuple[type, ...]] = {
    "id": str, "backend": str, "file": str, "created_at": int, "verified_at": int, "size": int,
    "sha256": str, "migration": str, "rows": dict,
}  # fmt: skip


def _entry(data: dict[str, Any]) -> Entry | None:
    """A manifest entry whose every field has its type, whose times are times and whose file
    is its own snapshot's name in the repository (never another path), else None."""
    if set(data) != set(_ENTRY_TYPES):
        return None
    for key, kind in _ENTRY_TYPES.items():
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            return None
    if data["backend"] not in SUFFIX or data["file"] != f"{data['id']}{SUFFIX[data['backend']]}":
        return None
    if not all(_is_time(data[k]) for k in ("created_at", "verified_at")):
        return None
    return Entry(**data)


def _is_time(value: object) -> bool:
    """A time in ms a page can show (a JSON number outside it would overflow a date)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 47


def find(repository: Path, snapshot: str) -> Entry:
    """The verified snapshot with that id, its file's checksum checked again."""
    for entry in entries(repository):
        if entry.id == snapshot:
            if snapshots.checksum(entry.path(repository)) != entry.sha256:
                raise ConfigError(
                    f"snapshot {snapshot}: its file's checksum is not the manifest's (changed "
                    "or damaged since it was verified)"
                )
            return entry
    raise ConfigError(f"--snapshot: no verified snapshot {snapshot} in the repository")


def keep(found: list[Entry], hourly: int, daily: int, weekly: int) -> set[str]:
    """The ids retention keeps: the newest snapshot of each of the newest `hourly` hours,
    `daily` days and `weekly` ISO weeks that have one (UTC)."""
    kept: set[str] = set()
    tiers = (
        (hourly, lambda ms: ms // HOUR_MS),
        (daily, lambda ms: ms // DAY_MS),
        (weekly, lambda ms: dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isocalendar()[:2]),
    )
    for count, bucket in tiers:
        seen: list[object] = []
        for entry in reversed(found):  # newest first
            key = bucket(entry.created_at)
            if key in seen:
                continue
            if len(seen) == count:
                break
            seen.append(key)
            kept.add(entry.id)
    return kept


def prune(repository: Path, hourly: int, daily: int, weekly: int) -> list[str]:
    """Remove the snapshots retention does not keep (the newest is always kept)."""
    found = entries(repository)
    kept = keep(found, hourly, daily, weekly)
    if found:
        kept.add(found[-1].id)
    removed = []
    for entry in found:
        if entry.id not in kept:
            (repository / f"{entry.id}.json").unlink(missing_ok=True)  # the entry first
            entry.path(repository).unlink(missing_ok=True)
            removed.append(entry.id)
    for orphan in orphans(repository, time.time()):
        orphan.unlink(missing_ok=True)
        removed.append(orphan.name)
    return removed


ORPHAN_SECONDS = 3600.0  # a backup in progress writes its file; one untouched this long is dead
_SNAPSHOT_FILE = re.compile(r"^(\d{8}T\d{6}Z-[0-9a-f]{6})(\.partial|\.sqlite3|\.pgdump)$")


def orphans(repository: Path, now_s: float) -> list[Path]:
    """Snapshot files a killed or crashed ``backup`` left: named as ``backup`` names them, with
    no manifest entry beside them and untouched for ``ORPHAN_SECONDS`` (so a backup still
    writing is never one). Any other file of the repository is never touched."""
    found = []
    for path in repository.iterdir():
        match = _SNAPSHOT_FILE.match(path.name)
        if match is None or (repository / f"{match.group(1)}.json").exists():
            continue
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode) and now_s - info.st_mtime > ORPHAN_SECONDS:
            found.append(path)
    return sorted(found)


def status(repository: Path, at_ms: int, max_age_ms: int) -> dict[str, Any]:
    """The newest verified snapshot and off-server copy with their ages, the last exercise,
    and what is missing; ``ok`` is false when either is missing or older than max_age_ms.
    What `backup-status` prints and the console shows admins."""
    found = entries(repository)
    newest = found[-1] if found else None
    problems: list[str] = []
    offsite = _record(repository / "offsite.json", OFFSITE_FIELDS, problems)
    exercise = _record(repository / "exercise.json", EXERCISE_FIELDS, problems)
    if newest is None:
        problems.append("no verified snapshot")
    elif at_ms - newest.verified_at > max_age_ms:
        problems.append(
            f"the newest verified snapshot is {age_text(at_ms - newest.verified_at)} old"
        )
    offsite_age = None if offsite is None else at_ms - int(offsite["verified_at"])
    if offsite_age is None:
        problems.append(NO_HOST_LOSS)
    elif offsite_age > max_age_ms:
        problems.append(f"the newest verified off-server copy is {age_text(offsite_age)} old")
    return {
        "ok": not problems,
        "problems": problems,
        "snapshots": len(found),
        "newest_snapshot": None if newest is None else asdict(newest),
        "snapshot_age_ms": None if newest is None else at_ms - newest.verified_at,
        "offsite": offsite,
        "offsite_age_ms": offsite_age,
        "host_loss_protection": offsite is not None,
        "exercise": exercise,
    }


def installation_status(configured: str | None, at_ms: int) -> dict[str, Any]:
    """:func:`status` of the installation's repository (``COORDINATOR_BACKUP_REPOSITORY``) with
    the default bound, as the service reads it for the console's Backups page and the
    attention check: a repository that is not configured or cannot be read is ``ok: false``
    with the problem named (``readable: false``), never an error."""
    if not configured:
        return {"ok": False, "problems": [NOT_CONFIGURED], "readable": False}
    try:
        repo = open_repository(Path(configured), create=False)
        found = status(repo, at_ms, int(MAX_AGE_HOURS * HOUR_MS))
    except (ConfigError, OSError) as exc:
        return {"ok": False, "problems": [str(exc)], "readable": False}
    return {**found, "readable": True, "repository": str(repo)}


def times(found: dict[str, Any]) -> dict[str, str | None]:
    """When the newest snapshot and off-server copy verified and the exercise ran (RFC 3339)
    of a :func:`installation_status`, None for what is missing."""
    newest, offsite, exercise = (found.get(k) for k in ("newest_snapshot", "offsite", "exercise"))
    return {
        "snapshot_at": None if newest is None else rfc3339(int(newest["verified_at"])),
        "offsite_at": None if offsite is None else rfc3339(int(offsite["verified_at"])),
        "exercise_at": None if exercise is None else rfc3339(int(exercise["at"])),
    }


def summary(found: dict[str, Any]) -> dict[str, Any]:
    """What an installation status says without where the repository and the copies are or
    what the snapshots hold: the API's answer to the agent that pages (``GET
    /projects/{p}/attention/backups``)."""
    return {
        "ok": found["ok"],
        "problems": found["problems"],
        "readable": found["readable"],
        "max_age_ms": int(MAX_AGE_HOURS * HOUR_MS),
        "snapshots": found.get("snapshots", 0),
        "snapshot_age_ms": found.get("snapshot_age_ms"),
        "offsite_age_ms": found.get("offsite_age_ms"),
        "host_loss_protection": bool(found.get("host_loss_protection")),
        **times(found),
    }


# What the status reads of the off-server copy's and the exercise's records (the first key is
# the record's time), with their types: a record missing one, or of another type, is ignored.
OFFSITE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "verified_at": int, "snapshot": str, "destination": str,
}  # fmt: skip
EXERCISE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "at": int, "snapshot": str, "total_seconds": (int, float), "within_target": bool,
}  # fmt: skip


def _record(
    path: Path, fields: dict[str, type | tuple[type, ...]], problems: list[str]
) -> dict[str, Any] | None:
    """The repository's record of a copy or an exercise, or None (absent, or unreadable or
    not of its shape: then a problem says so and the record counts as missing)."""
    if not path.exists():
        return None
    try:
        found = read_json(path)
    except ConfigError as exc:
        problems.append(f"{path.name} cannot be read ({exc}); it is ignored")
        return None
    time_key = next(iter(fields))
    wrong = [
        key
        for key, kind in fields.items()
        if not isinstance(found.get(key), kind)
        or (isinstance(found.get(key), bool) and kind is not bool)
    ]
    if wrong or not _is_time(found[time_key]):
        problems.append(f"{path.name} cannot be read ({(wrong or [time_key])[0]}); it is ignored")
        return None
    return found


def age_text(ms: int) -> str:
    """An age for people: minutes up to two hours, then hours."""
    minutes = ms // 60_000
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h"
