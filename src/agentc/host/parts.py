"""The parts a supervised host consists of, each with the owner, group and mode it must have:
accounts, directories, files, links, credentials; and the plan that lists them with the units
enabled and waiting (built by :mod:`agentc.host.plan`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

FileKind = Literal["seed", "generated", "settings"]

WHO = {"implementer": "implementer", "reviewer": "reviewer", "push": "push helper",
       "egress": "egress proxy"}  # fmt: skip


@dataclass(frozen=True)
class Account:
    key: str  # implementer, reviewer, push, egress
    name: str
    home: Path

    @property
    def who(self) -> str:
        return WHO[self.key]


@dataclass(frozen=True)
class Dir:
    path: Path
    owner: str
    group: str
    mode: int
    # "tree": a role's own tree (runs, clones, home), removed with its content by --uninstall;
    # "system": a directory of the host (/etc/systemd/system ...), made when missing but never
    # sealed or removed.
    kind: Literal["plain", "tree", "system"] = "plain"


@dataclass(frozen=True)
class File:
    path: Path
    data: bytes
    owner: str
    group: str
    mode: int
    # seed: a protected file, replaced by a fresh inode unless it is the one setup made;
    # generated: rewritten whenever it differs (units, the cron file);
    # settings: written when absent, rewritten only while nobody has edited it.
    kind: FileKind


@dataclass(frozen=True)
class Link:
    path: Path
    target: str


@dataclass(frozen=True)
class Credential:
    """A secret (or trust anchor) the owner places; setup never creates, reads or prints it,
    only holds it at its owner, group and mode, and refuses one another account could have
    read or changed."""

    path: Path
    owner: str
    group: str
    mode: int
    what: str
    secret: bool = True


@dataclass
class Plan:
    init: Literal["systemd", "cron"]
    accounts: list[Account] = field(default_factory=list)
    dirs: list[Dir] = field(default_factory=list)
    files: list[File] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    credentials: list[Credential] = field(default_factory=list)
    enabled: list[str] = field(default_factory=list)  # units (or cron jobs) switched on
    waiting: list[str] = field(default_factory=list)  # "<unit>: <what it waits for>"
