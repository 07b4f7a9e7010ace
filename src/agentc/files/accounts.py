"""Host mode's accounts: the rules each program's own account meets, and the one switch to it.

In host mode each role, the candidate push helper and the host's services run as an account of
their own. :func:`named_account_problems` is the rule those accounts are checked by (the
supervisor's preflight and ``run``, ``agentc-host check`` and ``setup``);
:func:`unprivileged_account` is the account a child of root becomes, refusing root, and
:func:`become` is the switch itself.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from collections.abc import Iterable
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.files.procs import run_check

# Groups whose members administer the host (sudo's defaults on Debian, Red Hat and Arch).
ADMIN_GROUPS = ("root", "sudo", "wheel", "admin", "adm", "docker", "lxd", "disk", "shadow")
SUDO = Path("/usr/bin/sudo")
SUDO_SECONDS = 10.0

PUSH_HELPER = "push helper"
ROLE_ACCOUNT_FIX = "create the role accounts (docs/operator-guide.md), or set mode = 'personal'"


def _with_fix(problem: str, fix: str) -> str:
    return f"{problem} (fix: {fix})"


def named_account_problems(
    accounts: Iterable[tuple[str, str]], *, missing_ok: bool = False
) -> list[str]:
    """The host-mode account rules for each ``(who, account name)``: it exists (unless
    ``missing_ok``: ``agentc-host setup`` makes the missing ones), is not root, shares no uid
    with another of them, is in no administering group and gets nothing from sudo."""
    problems: list[str] = []
    seen: dict[int, str] = {}
    for who, name in accounts:
        try:
            account = pwd.getpwnam(name)
        except KeyError:
            if missing_ok:
                continue
            if who == PUSH_HELPER:
                problems.append(
                    _with_fix(f"the push helper's account {name} does not exist",
                              f"create it (useradd --system --user-group --no-create-home "
                              f"--shell /usr/sbin/nologin {name}; docs/operator-guide.md), or "
                              "set [push_helper] user")
                )  # fmt: skip
            else:
                problems.append(_with_fix(f"role account {name} does not exist", ROLE_ACCOUNT_FIX))
            continue
        fix = f"use an unprivileged system account of its own for the {who} (userdel {name})"
        if account.pw_uid == 0 or account.pw_gid == 0:
            problems.append(_with_fix(f"the {who}'s account {name} is root (uid or group 0)", fix))
        if account.pw_uid in seen:
            problems.append(
                _with_fix(f"the {who}'s account {name} shares uid {account.pw_uid} with "
                          f"{seen[account.pw_uid]}", fix)
            )  # fmt: skip
        seen[account.pw_uid] = name
        groups = sorted(g.gr_name for g in grp.getgrall() if name in g.gr_mem)
        groups += [g.gr_name for g in grp.getgrall() if g.gr_gid == account.pw_gid]
        admin = sorted({g for g in groups if g in ADMIN_GROUPS})
        if admin:
            problems.append(
                _with_fix(f"the {who}'s account {name} is in the group {', '.join(admin)}",
                          f"gpasswd -d {name} <group>")
            )  # fmt: skip
        granted = sudo_grant(name)
        if granted:
            problems.append(
                _with_fix(f"the {who}'s account {name} may use sudo ({granted})",
                          f"remove {name} from /etc/sudoers and /etc/sudoers.d")
            )  # fmt: skip
    return problems


def sudo_grant(name: str) -> str | None:
    """What ``sudo -l`` lets ``name`` run (asked as root; None when nothing, when sudo is not
    installed, or when this process is not root and cannot ask)."""
    if os.geteuid() != 0 or not SUDO.exists():
        return None
    try:
        result = run_check(
            [str(SUDO), "-n", "-l", "-U", name],
            env={"PATH": "/usr/bin:/bin", "LANG": "C"},
            timeout=SUDO_SECONDS,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sudo -l failed: {exc}"
    out = result.stdout.strip()
    if result.returncode != 0 or "not allowed" in out or "may run" not in out:
        return None
    return " ".join(out.splitlines()[-1].split())[:200]


def unprivileged_account(name: str, what: str) -> pwd.struct_passwd:
    """The account ``name`` a child becomes (a role's, the push helper's, a service's), which
    must exist and must not be root: neither uid 0 nor group 0, the rule
    :func:`named_account_problems` checks too. Errors call it ``what``."""
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        raise SupervisorError(f"{what} {name} does not exist") from None
    if account.pw_uid == 0 or account.pw_gid == 0:
        raise SupervisorError(f"{what} {name} must not be root")
    return account


def become(account: pwd.struct_passwd) -> None:
    """In a child of root: become ``account`` for good: no supplementary groups, its primary
    group, its uid.

    The one account switch of host mode: ``launch-root``'s child and the loop's launches (each
    after joining the launch's cgroup), the host preflight's version launches, the push helper,
    the sign-in check and ``agentc-host``'s checks and services."""
    os.setgroups([])
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)
    if os.getuid() != account.pw_uid or os.geteuid() != account.pw_uid or os.getgroups():
        raise SupervisorError(f"could not become {account.pw_name}")
