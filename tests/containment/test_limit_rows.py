"""Resource-limit rows: a fork bomb and a memory hog inside one real launch end that launch,
its ``.state-terminal.json`` naming the limit, while a second launch and the host stay
responsive. Each hog is bounded (600 processes, 768 MiB), so a broken limit cannot harm the
machine; each holds its launch at the limit until the test has checked the others.

As root (personal mode) the launch gets a cgroup; as an unprivileged personal-mode user it gets
one only where the host delegates a cgroup subtree to it, else the rlimits stop the hog inside
its process and the record names no limit (``limits.backend_note``, docs/security.md)."""

from __future__ import annotations

import pwd
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.kit import (
    PORTABLE_PYTHON,
    Kit,
    cleanup,
    create_user,
    delete_user,
    make_kit,
    terminal,
)

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


LIMITS = {"memory_mib": 256, "processes": 64}
BACKEND = "from agentc.sandbox.limits import detect_backend; print(detect_backend())"


@pytest.fixture(scope="module", params=["root", "user"])
def kit(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    if request.param == "root":
        root = tmp_path_factory.mktemp("limits")
        made = make_kit(root / "kit", limits=LIMITS)
        try:
            yield made
        finally:
            cleanup(root)
        return
    name = create_user("agentc-l")
    home = Path(pwd.getpwnam(name).pw_dir)
    try:
        yield make_kit(home / "agentc-kit", user=name, limits=LIMITS)
    finally:
        delete_user(name)


def _as_launcher(kit: Kit) -> tuple[list[str], dict[str, str]]:
    """The argv prefix and environment the kit's launches run with (the user's, if any)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    if kit.user is None:
        return [], env
    env["HOME"] = pwd.getpwnam(kit.user).pw_dir
    return ["setpriv", f"--reuid={kit.uid}", f"--regid={kit.gid}", "--clear-groups"], env


def _backend(kit: Kit) -> str:
    prefix, env = _as_launcher(kit)
    argv = [*prefix, *PORTABLE_PYTHON, "-c", BACKEND]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.strip()


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
    named = None if _backend(kit) == "rlimit" else limit  # a cgroup names it, an rlimit not
    prefix, env = _as_launcher(kit)
    run, clone = kit.new_run(script(program))
    hog = subprocess.Popen(
        [*prefix, *kit.argv(run, clone)],
        env=env,
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
        if named is None and limit == "processes":
            # Known gap (docs/security.md "Known limits"): without a cgroup, RLIMIT_NPROC is
            # set in the launch's child outside its user namespace, so it counts every process
            # of the user: while the bomb holds the budget, the user's next launch cannot
            # start its sandbox. This pins the gap; it fails once the gap is closed.
            assert other.returncode != 0, other.stdout
        else:
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
    assert record["limit"] == named, record
