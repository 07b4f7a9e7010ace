"""The helper process: parent death, stopping, socket binding and argument checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.push.kit import HELPER, gone, start_helper, wait_gone

# Starts the helper as its child with --parent-pid naming itself, prints the helper's pid, and
# waits to be killed.
LAUNCH_ROOT = """
import os, subprocess, sys, time
argv = sys.argv[1:] + [f"--parent-pid={os.getpid()}"]
helper = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
print(helper.pid, flush=True)
time.sleep(60)
"""


def _serve_argv(base: Path, remote: Path, sock: Path) -> list[str]:
    return [
        str(HELPER),
        "serve",
        f"--socket={sock}",
        "--task=t1",
        "--launch=l1",
        f"--work-dir={base / 'work'}",
        f"--remote={remote}",
    ]


def test_the_helper_dies_with_its_launch_root(base: Path, remote: Path) -> None:
    sock = base / "push.sock"
    root = subprocess.Popen(
        [sys.executable, "-c", LAUNCH_ROOT, *_serve_argv(base, remote, sock)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert root.stdout is not None
        pid = int(root.stdout.readline())
        deadline = time.monotonic() + 15
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists()
        assert not gone(pid)
        root.kill()
        root.wait(timeout=5)
        assert wait_gone(pid, 10), "the helper outlived its launch root"
    finally:
        root.kill()
        root.communicate(timeout=5)


def test_a_parent_already_gone_stops_the_helper(base: Path, remote: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=5)
    done = subprocess.run(
        [*_serve_argv(base, remote, base / "push.sock"), f"--parent-pid={dead.pid}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    assert f"the parent process {dead.pid} is already gone" in done.stderr
    assert not (base / "push.sock").exists()


def test_sigterm_stops_the_helper_and_removes_its_socket(base: Path, remote: Path) -> None:
    helper = start_helper(base, remote)
    helper.proc.send_signal(signal.SIGTERM)
    assert helper.proc.wait(timeout=10) == 0
    assert not helper.socket.exists()
    assert "stopping on SIGTERM" in helper.log()


def test_socket_path_over_93_bytes_is_refused(base: Path, remote: Path) -> None:
    deep = base / ("d" * (93 - len(str(base)) - len("/") - len("/push.sock")))
    deep.mkdir()
    ok = deep / "push.sock"
    assert len(os.fsencode(ok)) == 93
    long = deep / "push.sockx"
    done = subprocess.run(
        _serve_argv(base, remote, long), capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 1
    assert "at most 93 bytes" in done.stderr
    assert list(deep.iterdir()) == []
    helper = subprocess.Popen(_serve_argv(base, remote, ok), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while not ok.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ok.exists()
        assert [p.name for p in deep.iterdir()] == ["push.sock"]
    finally:
        helper.terminate()
        helper.wait(timeout=10)


def test_unsafe_ids_and_bad_digests_are_refused(base: Path, remote: Path) -> None:
    argv = _serve_argv(base, remote, base / "push.sock")
    for bad in ("--task=../main", "--task=a/b", "--launch=x.lock", "--launch=.hidden"):
        done = subprocess.run([*argv, bad], capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 2, bad
        assert "is not a safe id" in done.stderr, bad
    done = subprocess.run(
        [*argv, "--known-digest=abc"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 2
    assert "SHA-256 digest" in done.stderr
    assert not (base / "push.sock").exists()
