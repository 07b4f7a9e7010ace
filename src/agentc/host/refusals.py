"""Everything that stops setup before it changes anything, each problem with its fix.

A path where setup puts a directory, seed or link that is something else (a symlink where a
directory goes: setup never follows one), an unexpected entry in a protected ``claude-config``,
an account host mode would refuse, a ``supervisor.toml`` that names other accounts or paths or
that another account could change, and a credential that is not a plain single-link file of
its owner or that another account could have read or replaced (that secret must be replaced,
not just re-moded).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agentc.host import accounts, seeds
from agentc.host.plan import Credential, Plan
from agentc.host.record import Machine, describe
from agentc.host.settings import HostSettings

RETIRED_LOGIN = ".credentials.json"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def refusals(settings: HostSettings, plan: Plan, machine: Machine) -> list[str]:
    problems: list[str] = []
    if machine.prefix is None:
        problems += accounts.problems(plan.accounts)
    for folder in plan.dirs:
        info = _lstat(machine.where(folder.path))
        if info is not None and not stat.S_ISDIR(info.st_mode):
            problems.append(
                f"{folder.path} is {describe(info)}, not a directory (fix: move it away; setup "
                "makes the directory and never follows a symlink)"
            )
    seeds_by_dir: dict[Path, set[str]] = {}
    for file in plan.files:
        info = _lstat(machine.where(file.path))
        if file.kind == "seed":
            seeds_by_dir.setdefault(file.path.parent, set()).add(file.path.name)
            if info is not None and (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1):
                problems.append(
                    f"{file.path} is {describe(info)} with {info.st_nlink} link(s), not a "
                    "plain file (fix: remove it; setup writes a fresh root-owned copy)"
                )
        elif info is not None and stat.S_ISDIR(info.st_mode):
            problems.append(f"{file.path} is a directory (fix: move it away)")
    for parent, names in seeds_by_dir.items():
        problems += _unexpected(machine.where(parent), parent, names)
    for link in plan.links:
        info = _lstat(machine.where(link.path))
        if info is not None and not stat.S_ISLNK(info.st_mode):
            problems.append(f"{link.path} is {describe(info)}, where setup puts a symlink "
                            "(fix: move it away)")  # fmt: skip
    problems += _supervisor_toml(settings, machine)
    for credential in plan.credentials:
        problems += credential_problems(credential, machine)
    return problems


def _unexpected(where: Path, folder: Path, expected: set[str]) -> list[str]:
    try:
        names = sorted(os.listdir(where))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [
        f"{folder / name}: unexpected entry in a protected directory (fix: remove it; only "
        f"{', '.join(sorted(expected))} belong there)"
        for name in names
        if name not in expected and name != RETIRED_LOGIN
    ]


def _supervisor_toml(settings: HostSettings, machine: Machine) -> list[str]:
    where = machine.where(settings.supervisor_toml)
    info = _lstat(where)
    if info is None:
        return []
    if not stat.S_ISREG(info.st_mode):
        return [f"{settings.supervisor_toml} is {describe(info)} (fix: make it a plain file)"]
    problems: list[str] = []
    if machine.prefix is None and info.st_uid != 0:
        problems.append(f"{settings.supervisor_toml} is owned by uid {info.st_uid} (fix: "
                        "chown root:root it)")  # fmt: skip
    if info.st_mode & 0o022:
        problems.append(f"{settings.supervisor_toml} is writable by other accounts (fix: "
                        "chmod go-w it)")  # fmt: skip
    return problems + seeds.supervisor_disagreement(settings, where)


def credential_problems(credential: Credential, machine: Machine) -> list[str]:
    """Why the credential at its path cannot be held as it is (none when it is missing)."""
    path = credential.path
    info = _lstat(machine.where(path))
    if info is None:
        return []
    place = (
        f"install -o {credential.owner} -g {credential.group} -m {credential.mode:04o} "
        f"/dev/stdin {path}"
    )
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        return [f"{path} ({credential.what}) is {describe(info)} with {info.st_nlink} link(s) "
                f"(fix: remove it and place the file itself: {place})"]  # fmt: skip
    problems: list[str] = []
    if machine.prefix is None:
        owner, group = machine.owner_of(path, info)
        if owner not in ("root", credential.owner):
            problems.append(f"{path} ({credential.what}) is owned by {owner}, which could have "
                            f"changed it (fix: replace it with a fresh copy: {place})")  # fmt: skip
    else:
        group = credential.group
    perm = stat.S_IMODE(info.st_mode)
    if perm & 0o022:
        problems.append(f"{path} ({credential.what}) is writable by other accounts (mode "
                        f"{perm:04o}): replace it with a copy you trust ({place})")  # fmt: skip
    if credential.secret:
        shared_group = perm & 0o040 and not (credential.mode & 0o040 and group == credential.group)
        if perm & 0o004 or shared_group:
            problems.append(
                f"{path} ({credential.what}) is readable by other accounts (mode {perm:04o}): "
                f"treat it as exposed: revoke it, then place a new one ({place})"
            )
    return problems
