"""The helper process: parent death, stopping, socket binding and argument checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentc.push.protocol import publish
from tests.push.kit import HELPER, git, gone, remote_ref, start_helper, wait_gone

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


def test_a_socket_path_longer_than_sun_path_is_served(
    base: Path, remote: Path, checkout: Path
) -> None:
    """A state kept deep in a home: the helper binds through the socket's directory and the
    agent CLI's client reaches it the same way (no shorter stand-in path anywhere)."""
    deep = base / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    long = deep / "s"
    assert len(os.fsencode(long)) > 108
    helper = subprocess.Popen(_serve_argv(base, remote, long), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while not long.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert long.is_socket()
        assert [p.name for p in deep.iterdir()] == ["s"]  # the staging name was renamed away
        revision = git(checkout, "rev-parse", "HEAD")
        answer = publish(long, "candidate", revision, checkout)
        assert answer["ref"] == "refs/agent-coordinator/candidates/t1/l1"
        assert remote_ref(remote, str(answer["ref"])) == revision
    finally:
        helper.terminate()
        helper.wait(timeout=10)


def test_a_socket_name_too_long_for_sun_path_is_refused(base: Path, remote: Path) -> None:
    deep = base / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    done = subprocess.run(
        _serve_argv(base, remote, deep / ("n" * 80)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    assert "the socket path must be absolute and its name short" in done.stderr
    assert list(deep.iterdir()) == []


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
