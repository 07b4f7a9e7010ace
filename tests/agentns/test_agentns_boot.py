"""[boot] acceptance tests: only on a wintermute kernel (the original's WINTERMUTE_BOOT=1 set).

They need a real agent namespace: ``/proc/self/agent_session`` and CAP_SYS_ADMIN. On a stock
kernel they are skipped; everything they can cover without the kernel is covered elsewhere.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.agentns.kit import BOOTED, child_env, is_hex32

pytestmark = pytest.mark.skipif(
    not BOOTED,
    reason="needs a wintermute kernel with agent namespaces (/proc/self/agent_session, "
    "WINTERMUTE_BOOT=1); stock kernel",
)


@pytest.fixture
def boot_env() -> dict[str, str | None]:
    # The real procfs and the real assay: drop the seams the other tests set.
    return {"AGENTNS_SESSION_PATH": None}


def _ids(run, boot_env) -> tuple[str, str]:
    r = run("--intent", "t", "--", "env", env=boot_env)
    assert r.returncode == 0, r.stderr
    env = child_env(r.stdout)
    assert env["AGENTNS_MODE"] == "prctl", r.stderr
    return env["AGENTNS_SESSION_ID"], Path("/proc/self/agent_session").read_text().strip()


def test_fresh_live_id_on_each_launch(run, boot_env):  # A-AC5, B-AC7
    first, host = _ids(run, boot_env)
    second, _ = _ids(run, boot_env)
    assert is_hex32(first) and is_hex32(second)
    assert first != "0" * 32
    assert first != second
    assert host not in (first, second)


def test_grandchildren_inherit_the_id(run, boot_env):  # A-AC6
    script = (
        'echo "$AGENTNS_SESSION_ID"; cat /proc/self/agent_session; '
        'sh -c "cat /proc/self/agent_session"'
    )
    r = run("--intent", "t", "--", "sh", "-c", script, env=boot_env)
    lines = r.stdout.split()
    assert len(set(lines)) == 1, r.stdout


def test_intent_tag_shows_up_in_procfs(run, boot_env):  # A-AC7
    r = run("--intent", "/build", "--", "sh", "-c", "cat /proc/self/agent_intent_tag", env=boot_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "/build"


def test_wall_budget_in_a_real_namespace(launcher, base_env):  # A-AC8
    env = {k: v for k, v in base_env.items() if k != "AGENTNS_SESSION_PATH"}
    started = time.monotonic()
    proc = subprocess.run(
        [launcher, "--intent", "t", "--budget", "wall=2s", "--", "sleep", "60"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -15
    assert time.monotonic() - started < 30
