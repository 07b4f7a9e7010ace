"""Every launch runs in its agent session: ``agentns-claude --intent headless:<role>``.

Real launches (real bwrap, the mock harness as a probe): the launch execs itself under the
launcher once, the harness sees the session, and every host-side record of the launch names
it. Stock kernel here: agentns synthesizes (``synth-fallback``); the mock file and the
launcher's seams give exact ids and the ``prctl`` path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from launchkit import Kit, terminal, write_config

from agentc.agentns import MODES
from agentc.core.errors import SupervisorError
from agentc.supervisor import agentsession

pytestmark = pytest.mark.root

HEX32 = re.compile(r"[0-9a-f]{32}")
ENV_PROBE = 'env > "$HOME/env.txt"\n'
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
MOCK_ID = "feedfacefeedfacefeedfacefeedface"


def _launch(
    kit: Kit,
    run: Path,
    clone: Path,
    env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    argv = [*(prefix or []), *kit.argv(run, clone)]
    return subprocess.run(
        argv, env={**BASE_ENV, **(env or {})}, capture_output=True, text=True, timeout=120, cwd="/"
    )


def _seen(run: Path) -> dict[str, str]:
    lines = (run / "state/home/env.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _result(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    line: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return line


def _probe_run(kit: Kit, env: dict[str, str] | None = None) -> tuple[Path, dict[str, str]]:
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone, env)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return run, _seen(run)


def _counting_launcher(kit: Kit, body: str) -> Path:
    """A launcher stand-in that counts its runs in ``<root>/count``, then does ``body``."""
    script = kit.root / "count-launcher"
    script.write_text(f'#!/bin/sh\necho run >> "{kit.root}/count"\n{body}')
    os.chmod(script, 0o755)  # noqa: S103 - the stand-in must be executable
    return script


def _count(kit: Kit) -> int:
    path = kit.root / "count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_harness_and_every_record_name_the_agent_session(kit: Kit) -> None:
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone)
    assert result.returncode == 0, result.stderr
    seen = _seen(run)
    sid, mode = seen["AGENTNS_SESSION_ID"], seen["AGENTNS_MODE"]
    assert HEX32.fullmatch(sid), sid
    assert seen["AGENTNS_INTENT"] == "headless:implementer"
    assert mode in MODES and mode != "mock"
    if not os.path.exists("/proc/self/agent_session"):  # a stock kernel: synthesized, warned
        assert mode == "synth-fallback"
        assert result.stderr.count("[agentns-claude] WARNING: kernel does not support") == 1
    expected = {"agentns_session_id": sid, "agentns_mode": mode}
    expected["agentns_intent"] = "headless:implementer"
    started = json.loads((run / ".state-started").read_text())
    for record in (started, terminal(run), _result(result)):
        assert {k: record[k] for k in expected} == expected
    assert agentsession.MARKER not in seen  # the loop guard never reaches the harness


def test_two_launches_get_different_ids(kit: Kit) -> None:
    first = _probe_run(kit)[1]["AGENTNS_SESSION_ID"]
    second = _probe_run(kit)[1]["AGENTNS_SESSION_ID"]
    assert HEX32.fullmatch(first) and HEX32.fullmatch(second)
    assert first != second


def test_the_mock_file_gives_an_exact_id(kit: Kit) -> None:
    mock = kit.root / "agentns-mock"
    mock.write_text(MOCK_ID + "\n")
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone, {"AGENTNS_MOCK_FILE": str(mock)})
    assert result.returncode == 0, result.stderr
    seen = _seen(run)
    assert (seen["AGENTNS_SESSION_ID"], seen["AGENTNS_MODE"]) == (MOCK_ID, "mock")
    assert result.stderr.count(f"[agentns-claude] MOCK MODE: session_id={MOCK_ID}") == 1
    end = terminal(run)
    assert (end["agentns_session_id"], end["agentns_mode"]) == (MOCK_ID, "mock")
    assert "AGENTNS_MOCK_FILE" not in seen  # the harness environment is still an allow-list


def test_a_launch_already_in_its_session_runs_the_launcher_no_more(kit: Kit) -> None:
    launcher = _counting_launcher(kit, 'exec "$REAL" "$@"\n')
    real = {"REAL": sys.executable}  # the stand-in then runs: python -P -c BOOT ...
    kit.settings["agentns_program"] = [str(launcher), "-P", "-c", agentsession.BOOT]
    write_config(kit)
    run, seen = _probe_run(kit, real)
    assert _count(kit) == 1  # a plain launch: exactly one exec of the launcher
    assert seen["AGENTNS_INTENT"] == "headless:implementer"

    # Wrapped by the caller with the launch's own intent: used as is, no second launcher.
    wrapped = [sys.executable, "-P", "-c", agentsession.BOOT, "--intent", "headless:implementer"]
    mock = {"AGENTNS_SESSION_ID_OVERRIDE": MOCK_ID, **real}
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone, mock, prefix=[*wrapped, "--"])
    assert result.returncode == 0, result.stderr
    assert _count(kit) == 1
    assert result.stderr.count("MOCK MODE") == 1
    assert _seen(run)["AGENTNS_SESSION_ID"] == MOCK_ID == terminal(run)["agentns_session_id"]

    # Wrapped with another intent (an outer agent's session): the launch gets its own.
    outer = [sys.executable, "-P", "-c", agentsession.BOOT, "--intent", "/build", "--"]
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone, real, prefix=outer)
    assert result.returncode == 0, result.stderr
    assert _count(kit) == 2
    seen = _seen(run)
    assert seen["AGENTNS_INTENT"] == "headless:implementer"
    assert terminal(run)["agentns_intent"] == "headless:implementer"


def test_a_launcher_that_gives_no_session_is_refused_not_looped(kit: Kit) -> None:
    # Runs the command after "--" without resolving anything.
    body = 'while [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'
    kit.settings["agentns_program"] = [str(_counting_launcher(kit, body))]
    write_config(kit)
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone)
    assert result.returncode == 1
    assert "agentns-claude ran but this launch has no agent session" in result.stderr
    assert "Traceback" not in result.stderr
    assert _count(kit) == 1
    assert sorted(os.listdir(run)) == ["prompt.md"]  # refused before anything was written


def test_a_missing_launcher_is_refused_before_the_run_is_touched(kit: Kit) -> None:
    kit.settings["agentns_program"] = [str(kit.root / "no-such-agentns")]
    write_config(kit)
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone)
    assert result.returncode == 1
    assert "cannot run agentns-claude" in result.stderr and "Traceback" not in result.stderr
    assert sorted(os.listdir(run)) == ["prompt.md"]


def test_agentns_no_unshare_in_the_config_passes_no_unshare(kit: Kit) -> None:
    kit.settings["agentns_no_unshare"] = True
    write_config(kit)
    run, seen = _probe_run(kit)
    assert seen["AGENTNS_MODE"] == "no-unshare" == terminal(run)["agentns_mode"]
    assert HEX32.fullmatch(seen["AGENTNS_SESSION_ID"])


def test_the_prctl_path_through_the_launcher_seams(kit: Kit) -> None:
    kernel_id = "0123456789abcdef0123456789abcdef"
    procfs = kit.root / "agent_session"
    procfs.write_text(kernel_id + "\n")
    seams = {
        "AGENTNS_SESSION_PATH": str(procfs),
        "AGENTNS_ASSAY_MOCK_VERDICT": "Live",
        "AGENTNS_PRCTL_MOCK_ERRNO": "0",
    }
    run, seen = _probe_run(kit, seams)
    assert (seen["AGENTNS_SESSION_ID"], seen["AGENTNS_MODE"]) == (kernel_id, "prctl")
    assert terminal(run)["agentns_session_id"] == kernel_id


def test_an_inherited_prctl_claim_outside_its_namespace_is_not_trusted(kit: Kit) -> None:
    forged = {
        "AGENTNS_SESSION_ID": "ab" * 16,
        "AGENTNS_INTENT": "headless:implementer",
        "AGENTNS_MODE": "prctl",
    }
    run, seen = _probe_run(kit, forged)
    assert seen["AGENTNS_SESSION_ID"] != forged["AGENTNS_SESSION_ID"]
    if not os.path.exists("/proc/self/agent_session"):
        assert seen["AGENTNS_MODE"] == "synth-fallback"


def test_a_dry_run_runs_no_launcher_and_says_where_the_session_comes_from(kit: Kit) -> None:
    run, clone = kit.new_run(ENV_PROBE)
    result = kit.launch(run, clone, "--dry-run")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["agent_session"].startswith("headless:implementer")
    assert "agentns-claude" not in result.stderr
    assert sorted(os.listdir(run)) == ["prompt.md"]


def test_the_session_in_the_environment_counts_only_for_its_own_role() -> None:
    env = {"AGENTNS_SESSION_ID": "ab" * 16, "AGENTNS_INTENT": "headless:implementer"}
    env["AGENTNS_MODE"] = "synth-fallback"
    found = agentsession.current("implementer", env)
    assert found == agentsession.AgentSession("ab" * 16, "synth-fallback", "headless:implementer")
    assert found.env() == env
    assert agentsession.current("reviewer", env) is None
    assert agentsession.current("implementer", {**env, "AGENTNS_MODE": "bogus"}) is None
    assert agentsession.current("implementer", {}) is None


def test_the_wrapped_command_line_is_the_launcher_then_this_process() -> None:
    from agentc.supervisor.config import SupervisorConfig

    config = SupervisorConfig(agentns_program=["/opt/agentns-claude"], agentns_no_unshare=True)
    args = sys.orig_argv[len(sys.orig_argv) - 2 :]
    argv = agentsession.wrapped_argv(config, "reviewer", args)
    head = ["/opt/agentns-claude", "--intent", "headless:reviewer", "--no-unshare", "--"]
    assert argv == [*head, sys.executable, *sys.orig_argv[1:]]
    default = agentsession.wrapped_argv(SupervisorConfig(), "implementer", args)
    assert default[:4] == [sys.executable, "-P", "-c", agentsession.BOOT]
    assert "--no-unshare" not in default
    with pytest.raises(SupervisorError, match="not started as its own"):
        agentsession.own_argv(["launch", "--role", "not-what-started-us"])
