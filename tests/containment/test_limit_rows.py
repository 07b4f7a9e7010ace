"""Resource-limit rows: a fork bomb and a memory hog inside one real launch end that launch,
its ``.state-terminal.json`` naming the limit, while a second launch and the host stay
responsive. Each hog is bounded (600 processes, 768 MiB), so a broken limit cannot harm the
machine; each holds its launch at the limit until the test has checked the others."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentc.supervisor.limits import detect_backend
from tests.supervisor.kit import Kit, cleanup, make_kit, terminal

pytestmark = pytest.mark.root

WAIT_SECONDS = 90  # a generous bound on waiting for a marker, never an assertion on time

HOLD = """
import os, time
def hold(what):
    open(os.environ["HOME"] + "/" + what, "w").close()
    for _ in range(600):                    # until the test releases it (at most 60 s)
        if os.path.exists(os.environ["HOME"] + "/release"):
            return
        time.sleep(0.1)
"""

FORK_BOMB = (
    HOLD
    + """
children = 0
for _ in range(600):                        # bounded: never more than 600 processes
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children += 1
else:
    raise SystemExit(0)                     # no limit: the row fails
hold("capped")
raise SystemExit(3)
"""
)

MEMORY_HOG = (
    HOLD
    + """
blocks = []
for i in range(48):                         # bounded: at most 768 MiB
    blocks.append(bytearray(16 * 1024 * 1024))
    if i == 8:
        hold("capped")                      # 144 MiB held, the limit (256 MiB) not yet hit
raise SystemExit(0)                         # no limit: the row fails
"""
)


def script(program: str) -> str:
    return f"echo alive > $HOME/alive\n/usr/bin/python3 - <<'AGENTC_HOG'\n{program}\nAGENTC_HOG\n"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    root = tmp_path_factory.mktemp("limits")
    made = make_kit(root / "kit", limits={"memory_mib": 256, "processes": 64})
    try:
        yield made
    finally:
        cleanup(root)


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the launch ended before {path.name}: {err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never appeared")
        time.sleep(0.05)


@pytest.mark.parametrize(("program", "limit"), [(FORK_BOMB, "processes"), (MEMORY_HOG, "memory")])
def test_a_hog_ends_its_launch_and_others_stay_responsive(
    kit: Kit, program: str, limit: str
) -> None:
    if detect_backend() == "rlimit":
        pytest.skip("no writable cgroup here: limits are per process (limits.backend_note)")
    run, clone = kit.new_run(script(program))
    hog = subprocess.Popen(
        kit.argv(run, clone),
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    home = run / "state/home"
    try:
        _wait_for(home / "capped", hog)
        # At the limit: another launch starts and finishes, and the host forks and allocates.
        other_run, other_clone = kit.new_run("echo alive > $HOME/alive\n")
        other = kit.launch(other_run, other_clone)
        assert other.returncode == 0, other.stderr
        assert (other_run / "state/home/alive").exists()
        assert terminal(other_run)["limit"] is None
        assert subprocess.run(["true"], timeout=30).returncode == 0
        assert len(bytearray(64 * 1024 * 1024)) == 64 * 1024 * 1024
        (home / "release").touch()
        hog.communicate(timeout=WAIT_SECONDS)
    finally:
        if hog.poll() is None:
            hog.kill()
            hog.communicate()
    assert (home / "alive").exists()
    record = terminal(run)
    assert hog.returncode != 0 and record["reason"] in ("failed", "killed"), record
    assert record["limit"] == limit, record
