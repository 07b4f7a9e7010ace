"""``agentc up``'s state directory is private to the user who runs it (issue 25).

An existing empty state directory made 0755 becomes 0700, nothing in it is open to another
account (the sample remote included, whatever the user's umask), and another local account can
neither read the remote nor reach the egress proxy's socket. A state directory that belongs to
another account is refused before anything in it is read or written.
"""

from __future__ import annotations

import os
import pwd
import socket
import stat
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, all_started, free_port, stop, wait_for

pytestmark = pytest.mark.root

# Another local account's attempts, run as it: read the remote, list the state, reach the proxy.
PROBE = """
import os, socket, subprocess, sys
state, sock = sys.argv[1], sys.argv[2]
for path in (state, f"{state}/remote.git/HEAD", f"{state}/admin-password"):
    try:
        os.listdir(path) if path == state else open(path, "rb").read()
        print("read", path)
    except PermissionError:
        print("refused", path)
listed = subprocess.run(["git", "ls-remote", f"{state}/remote.git"], capture_output=True)
print("ls-remote", listed.returncode)
try:
    socket.socket(socket.AF_UNIX).connect(sock)
    print("connected")
except PermissionError:
    print("refused socket")
"""


@pytest.fixture
def user() -> Iterator[str]:
    name = create_user("agentc-p")
    try:
        yield name
    finally:
        delete_user(name)


@pytest.fixture
def other() -> Iterator[str]:
    name = create_user("agentc-o")
    try:
        yield name
    finally:
        delete_user(name)


def _as(name: str) -> list[str]:
    entry = pwd.getpwnam(name)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]


# Made 0644 on purpose by the loop (a service URL and a project id, no secret), and inside the
# loop's own 0700 directory: no other account can reach them.
PUBLIC = {"supervisor/loop/coordinator-binding.toml", "supervisor/loop/reviewer-binding.toml"}


def _open_to_others(root: Path) -> list[str]:
    """Every entry under ``root`` with a group or other permission bit (links and the
    ``PUBLIC`` ones aside)."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode) or str(path.relative_to(root)) in PUBLIC:
                continue
            if info.st_mode & 0o077:
                found.append(f"{path} {info.st_mode & 0o7777:04o}")
    return found


def test_an_existing_0755_state_directory_is_made_private(user: str, other: str) -> None:
    entry = pwd.getpwnam(user)
    work = Path(entry.pw_dir) / "work"
    state = work / ".agentc"
    state.mkdir(parents=True, mode=0o755)
    os.chmod(state, 0o755)  # noqa: S103 - what an earlier mkdir with umask 022 leaves
    for path in (work, state):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(entry.pw_dir, 0o755)  # noqa: S103 - the other account may walk up to it
    os.chmod(work, 0o755)  # noqa: S103 - likewise
    runner = Runner(work, user)
    old = os.umask(0o022)  # the user's own umask, the usual one: up makes its files private
    try:
        proc = runner.start("up", "--port", str(free_port()), "--no-live")
    finally:
        os.umask(old)
    try:
        snap = wait_for(
            lambda: all_started(runner.status()) if proc.poll() is None else None,
            120,
            lambda: proc.poll(),
        )
        assert snap["processes"]["egress"]["running"], snap
        info = state.stat()
        assert (info.st_uid, info.st_mode & 0o7777) == (entry.pw_uid, 0o700)
        assert _open_to_others(state) == [], "\n".join(_open_to_others(state))
        sock = tomllib.loads((state / "supervisor.toml").read_text())["egress_socket"]
        assert sock == str(state.resolve() / "egress/proxy.sock")
        assert stat.S_ISSOCK(os.stat(sock).st_mode)
        probe = subprocess.run(
            [*_as(other), "/usr/bin/python3", "-c", PROBE, str(state), sock],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert probe.stdout.splitlines() == [
            f"refused {state}",
            f"refused {state}/remote.git/HEAD",
            f"refused {state}/admin-password",
            "ls-remote 128",
            "refused socket",
        ], probe.stderr
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    assert _open_to_others(state) == []  # nor anything made while it ran (logs, the loop's)


def test_a_state_directory_of_another_account_is_refused(other: str) -> None:
    """As root, which could write anywhere: the directory's owner is not the one running up."""
    entry = pwd.getpwnam(other)
    work = Path(entry.pw_dir)
    state = work / "theirs"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)  # noqa: S103 - another account's ordinary directory
    os.chown(state, entry.pw_uid, entry.pw_gid)
    done = Runner(work).run("up", "--state-dir", str(state), "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    assert (
        f"--state-dir {state}: the directory belongs to uid {entry.pw_uid}, not to you"
        in done.stderr
    )
    assert "Traceback" not in done.stderr
    info = state.stat()
    assert (info.st_uid, info.st_mode & 0o7777) == (entry.pw_uid, 0o755)  # untouched
    assert list(state.iterdir()) == []
    # The same for a directory that already holds another account's up.json.
    (state / "up.json").write_text('{"project_id": "x"}\n')
    os.chown(state / "up.json", entry.pw_uid, entry.pw_gid)
    again = Runner(work).run("status", "--state-dir", str(state))
    assert again.returncode == 2 and "cannot read it" in again.stderr, again.stderr
    done = Runner(work).run("up", "--state-dir", str(state), "--port", str(free_port()))
    assert done.returncode == 2 and "belongs to uid" in done.stderr, done.stderr


def test_the_owner_check_follows_a_link_to_the_users_own_directory(user: str) -> None:
    """``--state-dir`` naming a link to a directory of the user's own is that directory."""
    entry = pwd.getpwnam(user)
    work = Path(entry.pw_dir)
    real = work / "real"
    real.mkdir(mode=0o700)
    os.chown(real, entry.pw_uid, entry.pw_gid)
    (work / "link").symlink_to(real)
    os.lchown(work / "link", entry.pw_uid, entry.pw_gid)
    with socket.socket() as busy:  # refused later, at the port, after the owner check passed
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = Runner(work, user).run("up", "--state-dir", str(work / "link"), "--port", str(port))
    assert done.returncode == 2 and f"--port {port}: the port is busy" in done.stderr
