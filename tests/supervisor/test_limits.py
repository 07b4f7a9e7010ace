"""Per-launch limits under the real bwrap: a fork bomb and a memory hog are stopped inside
their launch while a second launch runs normally. Both hogs are bounded, so a broken limit
cannot harm the machine running the tests."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentc.sandbox.limits import (
    Backend,
    LaunchLimits,
    Limits,
    backend_note,
    detect_backend,
    remove_left,
    rlimits,
)

BWRAP = shutil.which("bwrap")
pytestmark = pytest.mark.skipif(BWRAP is None, reason="bwrap is not installed")

FORK_BOMB = """
import os, time
children = 0
for _ in range(600):                      # bounded: never more than 600 processes
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"fork refused after {children}: {exc.strerror}", flush=True)
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    children += 1
else:
    print("no limit", flush=True)
"""

MEMORY_HOG = """
blocks = []
for _ in range(48):                       # bounded: at most 768 MiB
    blocks.append(bytearray(16 * 1024 * 1024))
print("no limit", flush=True)
"""


def bwrap_argv(*command: str) -> list[str]:
    assert BWRAP is not None
    return [
        BWRAP, "--unshare-user", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
        "--proc", "/proc", "--dev", "/dev", "--", *command,
    ]  # fmt: skip


@pytest.fixture(params=["detected", "rlimit"])
def launch_limits(request: pytest.FixtureRequest) -> Iterator[LaunchLimits]:
    backend: Backend | None = None if request.param == "detected" else "rlimit"
    limits = LaunchLimits(
        Limits(memory_mib=256, processes=64, open_files=256, file_mib=16),
        f"agentc-test-{uuid.uuid4().hex[:8]}",
        backend=backend,
    )

    limits.create()
    yield limits
    limits.remove()


def run_limited(limits: LaunchLimits, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        bwrap_argv(sys.executable, "-c", script),
        preexec_fn=limits.enter,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_fork_bomb_is_stopped_and_a_second_launch_still_runs(
    launch_limits: LaunchLimits,
) -> None:
    def enter() -> None:
        launch_limits.enter()
        if launch_limits.backend == "rlimit" and os.geteuid() == 0:
            # RLIMIT_NPROC never binds root: launch as a user, as host mode's role accounts do
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)

    # the system's python: a user cannot reach this test's interpreter under /root
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    bomb = subprocess.Popen(
        bwrap_argv(python, "-c", FORK_BOMB),
        preexec_fn=enter,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert bomb.stdout is not None
        line = bomb.stdout.readline()
        assert line.startswith("fork refused after"), line
        assert int(line.split()[3].rstrip(":")) < 64
        # meanwhile another launch (no shared limits) starts and finishes normally
        other = subprocess.run(bwrap_argv("true"), timeout=60, check=False)
        assert other.returncode == 0
    finally:
        bomb.kill()
        bomb.wait()
        if bomb.stdout is not None:
            bomb.stdout.close()
    if launch_limits.backend != "rlimit":
        assert launch_limits.hit() == "processes"


def test_a_memory_hog_is_stopped(launch_limits: LaunchLimits) -> None:
    result = run_limited(launch_limits, MEMORY_HOG)
    assert "no limit" not in result.stdout
    assert result.returncode != 0
    if launch_limits.backend != "rlimit":
        assert launch_limits.hit() == "memory"
    else:
        assert "MemoryError" in result.stderr


def test_file_size_and_open_files_are_bounded(launch_limits: LaunchLimits, tmp_path: Path) -> None:
    script = (
        "import os, resource\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0],"
        " resource.getrlimit(resource.RLIMIT_CORE)[0])\n"
        f"f = open({str(tmp_path / 'big')!r}, 'wb')\n"
        "try:\n    f.write(b'x' * (17 * 1024 * 1024)); f.flush()\n"
        "except OSError as e:\n    print('refused', e.strerror)\n"
    )
    argv = bwrap_argv(sys.executable, "-c", script)
    argv[argv.index("--proc") : argv.index("--proc")] = ["--bind", str(tmp_path), str(tmp_path)]
    result = subprocess.run(
        argv,
        preexec_fn=launch_limits.enter,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.splitlines()[0] == "256 0", result.stderr
    assert "refused File too large" in result.stdout


def test_limits_of_zero_are_left_unset() -> None:
    pairs = dict(
        rlimits(Limits(memory_mib=0, processes=0, open_files=0, file_mib=0), with_memory=True)
    )
    assert pairs == {resource.RLIMIT_CORE: 0}


def test_the_backend_is_reported() -> None:
    backend = detect_backend()
    note = backend_note(backend)
    assert (note is None) == (backend != "rlimit")


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_bad_cgroup_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="bad cgroup name"):
        LaunchLimits(Limits(), name)


def test_cgroups_are_removed(launch_limits: LaunchLimits) -> None:
    groups = list(launch_limits.groups)
    launch_limits.remove()
    assert not any(group.exists() for group in groups)
    assert os.getpid()  # this process was never moved into them


SLOW_TO_EXIT = """
import os, time
r, w = os.pipe()
for _ in range(6):                        # bounded: 6 processes of 96 MiB each
    if os.fork() == 0:
        block = bytearray(96 * 1024 * 1024)
        block[::4096] = b"x" * len(block[::4096])   # touched: freeing it takes a while
        os.write(w, b".")
        time.sleep(600)
        os._exit(0)
got = b""
while len(got) < 6:                       # every child has touched its memory
    got += os.read(r, 6)
print("ready", flush=True)
time.sleep(600)
"""


def _running(pid: str) -> bool:
    """Whether ``pid`` still runs a program (an exiting or exited process has no cmdline)."""
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False


def test_removing_waits_until_every_killed_process_has_exited() -> None:
    limits = LaunchLimits(
        Limits(memory_mib=2048, processes=64), f"agentc-test-{uuid.uuid4().hex[:8]}"
    )
    if limits.backend == "rlimit":
        pytest.skip("no writable cgroup on this host: nothing to remove")
    limits.create()
    proc = subprocess.Popen(
        bwrap_argv(sys.executable, "-c", SLOW_TO_EXIT),
        preexec_fn=limits.enter,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        members = {pid for g in limits.groups for pid in (g / "cgroup.procs").read_text().split()}
        assert len(members) >= 8  # bwrap, its init, the script and its six children
        groups = list(limits.groups)
        limits.remove()
        assert [pid for pid in members if _running(pid)] == []
        assert not any(group.exists() for group in groups)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        limits.remove()


def test_what_a_dead_supervisor_left_in_a_launch_cgroup_is_ended() -> None:
    """A launch started in the instant before its supervisor died has no pid on record; the
    next supervisor knows only its launch id, so it ends what the named cgroups hold."""
    name = f"agentc-test-{uuid.uuid4().hex[:8]}"
    made = LaunchLimits(Limits(memory_mib=256, processes=64), name)
    if made.backend == "rlimit":
        pytest.skip("no writable cgroup on this host: nothing is left in one")
    made.create()
    groups = list(made.groups)
    proc = subprocess.Popen(["sleep", "600"], preexec_fn=made.enter)
    try:
        remove_left(Limits(), name, f"agentc-setup-{name}")  # the second was never made
        assert proc.wait(timeout=15) == -9
        assert not any(group.exists() for group in groups)
    finally:
        proc.kill()
        proc.wait()
        made.remove()
