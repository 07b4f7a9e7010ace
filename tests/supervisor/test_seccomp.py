"""The launch syscall filter, loaded by the real bwrap: each denied family works on the host and
fails with EPERM inside (ENOSYS for clone3), and ordinary programs still run under it."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentc.sandbox.seccomp import build_filter, program_fd, syscalls_denied

BWRAP = shutil.which("bwrap")
pytestmark = pytest.mark.skipif(BWRAP is None, reason="bwrap is not installed")

# Each probe: a syscall number and arguments chosen so the host answers something other than
# EPERM (success or a harmless argument error); the filter must turn it into EPERM.
PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 0 if rc >= 0 else ctypes.get_errno()
rows = {
    "keyctl": call(250, 0, -4 & 0xFFFFFFFF, 0),          # KEYCTL_GET_KEYRING_ID @u
    "add_key": call(248, 0, 0, 0, 0, 0),                   # NULL type: EFAULT on the host
    "bpf": call(321, 0xFFFF, 0, 0),                        # bad command: EINVAL on the host
    "perf_event_open": call(298, 0, 0, -1, -1, 0),         # NULL attr: EFAULT
    "userfaultfd": call(323, 0xFFFF),                      # bad flags: EINVAL
    "io_uring_setup": call(425, 1, 0),                     # NULL params: EFAULT
    "open_by_handle_at": call(304, -1, 0, 0),              # EBADF/EFAULT
    "init_module": call(175, 0, 0, 0),                     # EFAULT (root) / EPERM
    "kexec_load": call(246, 0, 0, 0, 0xFFFF),              # bad flags: EINVAL
    "clock_settime": call(227, 0xFFFF, 0),                 # bad clock: EINVAL
    "iopl": call(172, 4),                                  # bad level: EINVAL
    "ptrace": call(101, 0xFFFF, 0, 0, 0),                  # bad request: ESRCH/EIO
    "clone3": call(435, 0, 0),                             # NULL args: EFAULT/EINVAL
    "unshare_uts": call(272, 0x04000000),                  # CLONE_NEWUTS
    "setns": call(308, -1, 0),                             # EBADF
    "mount": call(165, 0, 0, 0, 0, 0),                     # EFAULT
    "pivot_root": call(155, 0, 0),                         # EFAULT
}
print(json.dumps(rows))
"""

ENOSYS_ROWS = {"clone3"}
CONFINED_ROWS = {"unshare_uts", "setns", "mount", "pivot_root"}


@pytest.fixture(scope="module")
def host_rows() -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
    ).stdout
    rows: dict[str, int] = json.loads(out)
    return rows


@pytest.fixture
def filter_fd(request: pytest.FixtureRequest) -> Iterator[int]:
    fd = program_fd(build_filter(request.param))
    yield fd
    os.close(fd)


def inside(fd: int, *command: str) -> subprocess.CompletedProcess[str]:
    assert BWRAP is not None
    os.lseek(fd, 0, os.SEEK_SET)  # bwrap reads the program to its end each time
    argv = [
        BWRAP, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
        "--seccomp", str(fd), "--", *command,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, pass_fds=(fd,), check=False)


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86_64")
@pytest.mark.parametrize("filter_fd", ["implementer"], indirect=True)
def test_every_denied_family_works_on_the_host_and_fails_inside(
    host_rows: dict[str, int], filter_fd: int
) -> None:
    # the keyring row is the one every user can reach on the host; as root every row is
    assert host_rows["keyctl"] == 0
    if os.geteuid() == 0:
        assert errno.EPERM not in host_rows.values(), host_rows
    result = inside(filter_fd, sys.executable, "-c", PROBE)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    for name, got in rows.items():
        want = errno.ENOSYS if name in ENOSYS_ROWS else errno.EPERM
        assert got == want, f"{name}: {os.strerror(got) if got else 'allowed'} inside"


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86_64")
@pytest.mark.parametrize("filter_fd", ["reviewer"], indirect=True)
def test_the_reviewer_filter_keeps_namespaces_for_its_candidate_sandbox(
    host_rows: dict[str, int], filter_fd: int
) -> None:
    result = inside(filter_fd, sys.executable, "-c", PROBE)
    rows = json.loads(result.stdout)
    assert rows["keyctl"] == errno.EPERM and rows["bpf"] == errno.EPERM
    assert rows["setns"] != errno.EPERM and rows["mount"] != errno.EPERM
    # and a nested bwrap (the candidate sandbox) still starts under it
    assert BWRAP is not None
    nested = inside(
        filter_fd, BWRAP, "--unshare-user", "--unshare-pid", "--unshare-net",
        "--ro-bind", "/", "/", "--dev", "/dev", "--", "true",
    )  # fmt: skip
    assert nested.returncode == 0, nested.stderr


@pytest.mark.parametrize("filter_fd", ["implementer"], indirect=True)
def test_ordinary_programs_run_under_the_filter(filter_fd: int, tmp_path: Path) -> None:
    script = (
        "import subprocess, threading, tempfile;"
        "t = threading.Thread(target=lambda: None); t.start(); t.join();"
        "print(subprocess.run(['git', '--version'], capture_output=True, text=True).stdout)"
    )
    result = inside(filter_fd, sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("git version")
    shell = inside(filter_fd, "/bin/sh", "-c", "echo a | sort | head -1 && ls / >/dev/null")
    assert shell.returncode == 0 and shell.stdout == "a\n", shell.stderr


def test_the_implementer_denies_more_than_the_reviewer() -> None:
    assert set(syscalls_denied("reviewer")) < set(syscalls_denied("implementer"))
    assert {"keyctl", "bpf", "io_uring_setup"} <= set(syscalls_denied("reviewer"))
    assert len(build_filter("implementer")) > len(build_filter("reviewer"))
