"""--budget: the grammar, its refusals, the reporting, and userspace enforcement of wall/fork."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import agentc.agentns
from agentc.agentns import Budget, BudgetError, parse_budget
from agentc.agentns.budget import U64_MAX
from tests.agentns.kit import alive, child_env, pids_with_cmdline, read_pids, wait_until

# --- grammar (in-process) -------------------------------------------------------------------


def test_worked_example():
    b = parse_budget("wall=3600s,syscalls=1e7,write_bytes=10G,fork=1000")
    assert (b.wall_s, b.syscalls, b.write_bytes, b.fork) == (3600, 10_000_000, 10_737_418_240, 1000)
    assert b.given() == ("wall", "syscalls", "write_bytes", "fork")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("wall=90", Budget("wall=90", wall_s=90)),
        ("wall=2m", Budget("wall=2m", wall_s=120)),
        ("wall=1h,", Budget("wall=1h,", wall_s=3600)),
        (" wall = 5s , fork=3 ,, ", Budget(" wall = 5s , fork=3 ,, ", wall_s=5, fork=3)),
        ("fork=1,fork=2", Budget("fork=1,fork=2", fork=2)),  # the last value wins
        ("write_bytes=1K", Budget("write_bytes=1K", write_bytes=1024)),
        ("write_bytes=2T", Budget("write_bytes=2T", write_bytes=2 * 1024**4)),
        ("syscalls=0e99", Budget("syscalls=0e99", syscalls=0)),
        ("syscalls=5e30", Budget("syscalls=5e30", syscalls=U64_MAX)),  # saturates
        ("wall=99999999999999999999h", Budget("wall=99999999999999999999h", wall_s=U64_MAX)),
    ],
)
def test_accepted_specs(spec, expected):
    assert parse_budget(spec) == expected


# --- refusals (through the command) ---------------------------------------------------------

REFUSALS = [
    ("", "budget spec is empty"),
    (" , ,", "budget spec is empty"),
    ("wall", 'expected key=value, got "wall"'),
    (
        "wal=3s",
        'unknown budget key "wal" (want one of: wall, syscalls, write_bytes, fork)',
    ),
    ("wall=3s,Fork=1", 'unknown budget key "Fork"'),
    ("wall=500ms", 'bad value for wall="500ms": millisecond budgets unsupported'),
    ("wall=1.5s", 'bad value for wall="1.5s"'),
    ("wall=-1", 'bad value for wall="-1"'),
    ("wall=+1", 'bad value for wall="+1"'),
    ("wall=3d", 'bad value for wall="3d"'),
    ("wall=s", 'bad value for wall="s"'),
    ("wall=", 'bad value for wall="": empty value'),
    ("syscalls=1E7", 'bad value for syscalls="1E7"'),
    ("syscalls=1e", 'bad value for syscalls="1e"'),
    ("syscalls=ten", 'bad value for syscalls="ten"'),
    ("write_bytes=10g", 'bad value for write_bytes="10g"'),
    ("write_bytes=10KB", 'bad value for write_bytes="10KB"'),
    ("write_bytes=10GiB", 'bad value for write_bytes="10GiB"'),
    ("fork=1_000", 'bad value for fork="1_000"'),
    ("fork=١٢", 'bad value for fork="١٢"'),  # non-ASCII digits
]


@pytest.mark.parametrize(("spec", "message"), REFUSALS)
def test_bad_budget_fails_before_exec(run, tmp_path: Path, spec, message):
    marker = tmp_path / "ran"
    r = run("--intent", "t", "--budget", spec, "--", "touch", str(marker))
    assert r.returncode == 2
    assert f"agentns-claude: --budget: {message}" in r.stderr
    assert "Traceback" not in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize(("spec", "message"), REFUSALS)
def test_budget_errors_in_process(spec, message):
    with pytest.raises(BudgetError) as exc:
        parse_budget(spec)
    assert message in str(exc.value)


# --- reporting ------------------------------------------------------------------------------


def test_verbose_logs_budget_and_enforcement(run):
    r = run("--intent", "t", "--verbose", "--budget", "wall=60s,syscalls=1e7", "--", "true")
    assert r.returncode == 0
    assert "[agentns-claude] budget=wall=60s,syscalls=1e7\n" in r.stderr
    assert "[agentns-claude] budget enforced=wall unenforced=syscalls\n" in r.stderr


def test_unenforceable_keys_are_reported_never_dropped(run):
    r = run("--intent", "t", "--budget", "syscalls=1e7,write_bytes=10G", "--", "env")
    assert r.returncode == 0
    env = child_env(r.stdout)
    assert env["AGENTNS_BUDGET_ENFORCED"] == ""
    assert env["AGENTNS_BUDGET_UNENFORCED"] == "syscalls,write_bytes"
    warning = next(x for x in r.stderr.splitlines() if "not enforced" in x)
    assert warning.startswith("[agentns-claude] WARNING: budget keys not enforced: syscalls:")
    assert "write_bytes:" in warning


def test_wall_is_enforced_and_exported(run):
    r = run("--intent", "t", "--budget", "wall=60s", "--", "env")
    env = child_env(r.stdout)
    assert env["AGENTNS_BUDGET_ENFORCED"] == "wall"
    assert env["AGENTNS_BUDGET_UNENFORCED"] == ""
    assert "not enforced" not in r.stderr


@pytest.mark.root  # checks the root exemption of RLIMIT_NPROC
def test_fork_is_reported_unenforced_for_root(run):
    r = run("--intent", "t", "--budget", "fork=5", "--", "env")
    env = child_env(r.stdout)
    assert env["AGENTNS_BUDGET_UNENFORCED"] == "fork"
    assert "fork: the real uid is root" in r.stderr


# --- wall enforcement (real processes, real signals) ----------------------------------------


def _spawn(launcher: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [launcher, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _no_watchdog_left(tag: str) -> bool:
    return wait_until(lambda: not pids_with_cmdline(tag), timeout=15)


def test_wall_budget_ends_sleep_60_with_its_whole_tree(launcher, base_env, tmp_path):  # A-AC8
    tag = f"wall-{uuid.uuid4().hex}"
    pidfile = tmp_path / "pids"
    script = f"sleep 60 & echo $! >> {pidfile}; (sleep 60; true) & echo $! >> {pidfile}; sleep 60"
    started = time.monotonic()
    proc = _spawn(
        launcher, base_env, "--intent", tag, "--budget", "wall=2s", "--", "sh", "-c", script
    )
    _, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == -15  # the command itself (same pid) died of SIGTERM
    assert elapsed < 30, "well before the 60 s sleep"
    assert "[agentns-claude] budget: wall=2s exceeded; SIGTERM to" in err
    for pid in read_pids(pidfile):

        def gone(pid: int = pid) -> bool:
            return not alive(pid)

        assert wait_until(gone), f"descendant {pid} survived"
    assert _no_watchdog_left(tag), "the watchdog outlived the session"


def test_wall_budget_kills_what_ignores_sigterm(launcher, base_env, tmp_path):
    tag = f"wall-{uuid.uuid4().hex}"
    pidfile = tmp_path / "pids"
    # The ignored SIGTERM is inherited by the background sleep, so both need the SIGKILL.
    script = f"trap '' TERM; sleep 60 & echo $! >> {pidfile}; echo $$ >> {pidfile}; wait"
    env = {**base_env, "AGENTNS_WALL_GRACE": "1"}
    proc = _spawn(launcher, env, "--intent", tag, "--budget", "wall=1s", "--", "sh", "-c", script)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -9
    assert "SIGKILL to 2 processes" in err
    for pid in read_pids(pidfile):
        assert not alive(pid)
    assert _no_watchdog_left(tag)


def test_wall_budget_follows_orphans_after_the_command_exits(launcher, base_env, tmp_path):
    tag = f"wall-{uuid.uuid4().hex}"
    pidfile = tmp_path / "pids"
    # The command exits after a second; its background sleep is left behind, orphaned, and
    # still belongs to the session: the wall budget ends it too.
    script = f"sleep 60 >/dev/null 2>&1 & echo $! >> {pidfile}; sleep 1"
    # No pipes: the watchdog holds stderr until the session is over, which is the point here.
    proc = subprocess.Popen(
        [launcher, "--intent", tag, "--budget", "wall=3s", "--", "sh", "-c", script],
        env=base_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert proc.wait(timeout=60) == 0
    (orphan,) = read_pids(pidfile)
    assert alive(orphan), "the orphan should still run after the command exited"
    assert wait_until(lambda: not alive(orphan), timeout=30), "orphan outlived the wall budget"
    assert _no_watchdog_left(tag)


def test_wall_budget_does_not_touch_a_quick_command(launcher, base_env):
    tag = f"wall-{uuid.uuid4().hex}"
    started = time.monotonic()
    proc = _spawn(
        launcher, base_env, "--intent", tag, "--budget", "wall=600s", "--", "sh", "-c", "exit 7"
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7
    assert time.monotonic() - started < 30  # the watchdog does not hold the pipes for 600 s
    assert "exceeded" not in err
    assert _no_watchdog_left(tag)


def test_wall_budget_keeps_the_pid(launcher, base_env):
    proc = _spawn(
        launcher, base_env, "--intent", "t", "--budget", "wall=60s", "--", "sh", "-c", "echo $$"
    )
    out, _ = proc.communicate(timeout=60)
    assert int(out) == proc.pid


# --- fork enforcement -----------------------------------------------------------------------


def _unprivileged_launch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the launcher where RLIMIT_NPROC binds: as ourselves, or as nobody when we are root."""
    if os.geteuid() != 0:
        from tests.agentns.kit import LAUNCHER

        return subprocess.run(
            [LAUNCHER, *args], env=env, capture_output=True, text=True, timeout=60
        )
    # Root is exempt from RLIMIT_NPROC; run the same package as uid 65534. The venv interpreter
    # may live under /root, so use an interpreter nobody can execute, with the source on its path.
    src = str(Path(agentc.agentns.__file__).parents[2])
    code = "import sys; from agentc.agentns.cli import main; sys.exit(main())"
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            probe = subprocess.run(
                [python, "-c", "import sys; assert sys.version_info >= (3, 11)"],
                user=65534,
                group=65534,
                extra_groups=[],
                capture_output=True,
                cwd="/",
            )
        except OSError:
            continue  # not executable for uid 65534 (e.g. under /root)
        if probe.returncode == 0:
            return subprocess.run(
                [python, "-c", code, *args],
                env={**env, "PYTHONPATH": src},
                user=65534,
                group=65534,
                extra_groups=[],
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
            )
    pytest.skip("no Python >= 3.11 that uid 65534 can run (needed to test RLIMIT_NPROC as root)")


def test_fork_budget_limits_process_count(base_env):
    # fork=3: the shell may start about three more tasks; dash gives up at the first refused
    # fork ("Cannot fork", exit 2), long before the tenth.
    script = 'echo "$AGENTNS_BUDGET_ENFORCED"; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 2 & done'
    r = _unprivileged_launch(
        ["--intent", "t", "--budget", "fork=3", "--", "sh", "-c", script], base_env
    )
    assert r.stdout.strip() == "fork"
    assert "Cannot fork" in r.stderr
    assert r.returncode != 0
    assert "not enforced" not in r.stderr


def test_generous_fork_budget_does_not_get_in_the_way(base_env):
    script = "for i in 1 2 3; do true & done; wait; echo ok"
    r = _unprivileged_launch(
        ["--intent", "t", "--budget", "fork=50", "--", "sh", "-c", script], base_env
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_wall_budget_works_when_the_caller_ignores_sigchld(launcher, base_env):
    # An ignored SIGCHLD survives exec; the launcher's wait for its helper fork gets ECHILD.
    script = f'trap "" CHLD; exec {launcher} --intent t --budget wall=60s -- sh -c "exit 5"'
    r = subprocess.run(["sh", "-c", script], env=base_env, capture_output=True, timeout=60)
    assert r.returncode == 5, r.stderr


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "99999"])
def test_bad_wall_grace_is_refused_before_exec(run, tmp_path, value):
    marker = tmp_path / "ran"
    r = run(
        "--intent",
        "t",
        "--budget",
        "wall=5s",
        "--",
        "touch",
        str(marker),
        env={"AGENTNS_WALL_GRACE": value},
    )
    assert r.returncode == 2
    assert f'agentns-claude: AGENTNS_WALL_GRACE="{value}": expected seconds' in r.stderr
    assert not marker.exists()
