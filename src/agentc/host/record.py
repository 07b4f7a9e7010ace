"""What setup installed, and the machine it installed it on.

The record (``<state>/host-setup.json``, root 0600) lists every account setup made and every
path it laid out, with the owner, group and mode it gave it, a file's digest (so an edited
settings file is recognised and kept) and a seed's inode (so a seed is known to be the fresh
one setup made). ``--uninstall`` removes exactly what it lists.

:class:`Machine` is where setup acts: the host itself (real accounts, ``chown``), or a folder
(``--prefix``): there every host path lies below the folder, nothing is chowned and no account
is made, and the record is where owners and accounts are kept, which is what tests read.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentc.core.errors import ConfigError
from agentc.files import UnsafeFile, read_private, write_atomic

VERSION = 1
MAX_RECORD = 4 * 1024 * 1024


@dataclass
class Record:
    init: str = ""
    accounts: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> key, created
    paths: dict[str, dict[str, Any]] = field(default_factory=dict)  # host path -> entry
    enabled: list[str] = field(default_factory=list)

    def to_json(self) -> bytes:
        data = {
            "version": VERSION,
            "init": self.init,
            "accounts": self.accounts,
            "paths": dict(sorted(self.paths.items())),
            "enabled": sorted(self.enabled),
        }
        return json.dumps(data, indent=1, sort_keys=False).encode() + b"\n"

    @classmethod
    def from_json(cls, raw: bytes, where: Path) -> Record:
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("version") != VERSION:
                raise ValueError("not a version 1 record")
            return cls(
                str(data["init"]), dict(data["accounts"]), dict(data["paths"]),
                list(data["enabled"]),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{where}: the setup record is damaged ({exc}); move it aside to start afresh"
            ) from None


class Machine:
    """The host setup acts on (``prefix`` None), or a folder standing for it."""

    def __init__(self, prefix: Path | None, record_path: Path) -> None:
        self.prefix = prefix
        self.record_path = record_path
        self.record = self._load()
        self.saved = self.record.to_json()

    def where(self, path: Path) -> Path:
        """Where the host path ``path`` is on this machine."""
        if self.prefix is None:
            return path
        return self.prefix / path.relative_to("/")

    def _load(self) -> Record:
        where = self.where(self.record_path)
        owner = 0 if self.prefix is None else os.geteuid()
        try:
            raw = read_private(where, max_bytes=MAX_RECORD, owner_uid=owner)
        except UnsafeFile as exc:
            if exc.missing:
                return Record()
            raise ConfigError(f"setup record {where}: {exc.reason}") from None
        return Record.from_json(raw, where)

    def save(self) -> bool:
        """Write the record if it changed; whether it did."""
        data = self.record.to_json()
        if data == self.saved:
            return False
        write_atomic(self.where(self.record_path), data, mode=0o600)
        self.saved = data
        return True

    def forget(self) -> None:
        self.where(self.record_path).unlink(missing_ok=True)

    # -- owners ---------------------------------------------------------------------------

    def owner_of(self, path: Path, info: os.stat_result) -> tuple[str, str]:
        """(owner, group) of ``path`` by name: on the host from the inode, in a prefix as
        recorded (``?`` for a path setup never laid out)."""
        if self.prefix is not None:
            entry = self.record.paths.get(str(path), {})
            return str(entry.get("owner", "?")), str(entry.get("group", "?"))
        return _user_name(info.st_uid), _group_name(info.st_gid)

    def chown(self, path: Path, owner: str, group: str) -> None:
        if self.prefix is None:
            os.chown(self.where(path), uid_of(owner), gid_of(group), follow_symlinks=False)

    def account_exists(self, name: str) -> bool:
        if self.prefix is not None:
            return name in self.record.accounts
        try:
            pwd.getpwnam(name)
        except KeyError:
            return False
        return True

    def systemd_running(self) -> bool:
        return Path("/run/systemd/system").is_dir()


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def uid_of(name: str) -> int:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise ConfigError(f"account {name} does not exist") from None


def gid_of(name: str) -> int:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise ConfigError(f"group {name} does not exist") from None


def describe(info: os.stat_result) -> str:
    """What kind of file an inode is, in words."""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    return "a special file"
