"""Every launch runs in its agent session ``headless:<role>``, established in process.

Real launches (real bwrap, the mock harness as a probe): the launch establishes the session
itself (agentns's ladder, no exec), the harness sees it, and every host-side record of the
launch names it. Stock kernel here: agentns synthesizes (``synth-fallback``); the mock file and
agentns's seams give exact ids and the ``prctl`` path.
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

from agentc.agentns import CHILD_ENV_VARS, MODES
from agentc.core.errors import SupervisorError
from agentc.supervisor.launch import agentsession
from tests.supervisor.kit import Kit, terminal, write_config

pytestmark = pytest.mark.root

HEX32 = re.compile(r"[0-9a-f]{32}")
ENV_PROBE = 'env > "$HOME/env.txt"\n'
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
MOCK_ID = "feedfacefeedfacefeedfacefeedface"
KERNEL_ID = "0123456789abcdef0123456789abcdef"
# agentns-claude run by this interpreter, for callers that wrap the launch themselves.
BOOT = "import sys; from agentc.agentns.cli import main; sys.exit(main())"
AGENTNS = [sys.executable, "-P", "-c", BOOT]


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
    assert not {k for k in seen if k.startswith("AGENTC_AGENTNS")}  # no re-exec marker


def _kernel_seams(kit: Kit, prctl_errno: str = "0") -> dict[str, str]:
    """agentns's seams for a wintermute kernel: procfs read-back, assay Live, prctl result."""
    procfs = kit.root / "agent_session"
    procfs.write_text(KERNEL_ID + "\n")
    return {
        "AGENTNS_SESSION_PATH": str(procfs),
        "AGENTNS_ASSAY_MOCK_VERDICT": "Live",
        "AGENTNS_PRCTL_MOCK_ERRNO": prctl_errno,
    }


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


def test_a_launch_already_in_its_session_keeps_it(kit: Kit) -> None:
    # Wrapped by the caller with the launch's own intent: used as is, none established.
    wrapped = [*AGENTNS, "--intent", "headless:implementer", "--"]
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone, {"AGENTNS_SESSION_ID_OVERRIDE": MOCK_ID}, wrapped)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("MOCK MODE") == 1  # the wrapper's; the launch resolved nothing
    assert _seen(run)["AGENTNS_SESSION_ID"] == MOCK_ID == terminal(run)["agentns_session_id"]


def test_a_launch_in_another_intent_gets_its_own_session(kit: Kit) -> None:
    # Wrapped with another intent (an outer agent's session): the launch gets its own.
    record = kit.root / "outer.json"
    outer = [*AGENTNS, "--intent", "/build", "--record", str(record), "--"]
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone, prefix=outer)
    assert result.returncode == 0, result.stderr
    outer_id = json.loads(record.read_text())["session_id"]
    seen = _seen(run)
    assert seen["AGENTNS_INTENT"] == "headless:implementer" == terminal(run)["agentns_intent"]
    assert HEX32.fullmatch(seen["AGENTNS_SESSION_ID"])
    assert seen["AGENTNS_SESSION_ID"] != outer_id
    assert terminal(run)["agentns_session_id"] == seen["AGENTNS_SESSION_ID"]


def test_an_agentns_refusal_is_a_clear_refusal_before_the_run_is_touched(kit: Kit) -> None:
    run, clone = kit.new_run(ENV_PROBE)
    result = _launch(kit, run, clone, _kernel_seams(kit, "EPERM"))
    assert result.returncode == 1
    assert "agentc-supervisor: agent session headless:implementer: prctl(PR_SET_AGENT_NS) " in (
        result.stderr
    )
    assert "CAP_SYS_ADMIN" in result.stderr and "Traceback" not in result.stderr
    assert sorted(os.listdir(run)) == ["prompt.md"]  # refused before anything was written


def test_agentns_no_unshare_in_the_config_passes_no_unshare(kit: Kit) -> None:
    kit.settings["agentns_no_unshare"] = True
    write_config(kit)
    run, seen = _probe_run(kit)
    assert seen["AGENTNS_MODE"] == "no-unshare" == terminal(run)["agentns_mode"]
    assert HEX32.fullmatch(seen["AGENTNS_SESSION_ID"])


def test_the_prctl_path_through_the_agentns_seams(kit: Kit) -> None:
    run, seen = _probe_run(kit, _kernel_seams(kit))
    assert (seen["AGENTNS_SESSION_ID"], seen["AGENTNS_MODE"]) == (KERNEL_ID, "prctl")
    assert terminal(run)["agentns_session_id"] == KERNEL_ID
    assert terminal(run)["agentns_mode"] == "prctl"


def test_an_inherited_prctl_session_it_is_in_is_kept(kit: Kit) -> None:
    # As launch-root's child gets it: the namespace (here the procfs seam) and the variables.
    # Establishing again would fail (EPERM, as for a role account), so success means kept.
    inherited = {
        "AGENTNS_SESSION_ID": KERNEL_ID,
        "AGENTNS_INTENT": "headless:implementer",
        "AGENTNS_MODE": "prctl",
    }
    run, seen = _probe_run(kit, {**_kernel_seams(kit, "EPERM"), **inherited})
    assert (seen["AGENTNS_SESSION_ID"], seen["AGENTNS_MODE"]) == (KERNEL_ID, "prctl")
    assert terminal(run)["agentns_session_id"] == KERNEL_ID


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


def test_a_dry_run_establishes_nothing_and_says_where_the_session_comes_from(kit: Kit) -> None:
    run, clone = kit.new_run(ENV_PROBE)
    result = kit.launch(run, clone, "--dry-run")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    expected = "headless:implementer (established by agentns when the launch runs)"
    assert plan["agent_session"] == expected
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


@pytest.fixture
def agentns_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean in-process environment: no AGENTNS_* but a stock kernel's (absent) procfs."""
    for key in CHILD_ENV_VARS:  # set, then removed: whatever ensure() sets is undone after
        monkeypatch.setenv(key, "-")
    for key in list(os.environ):
        if key.startswith("AGENTNS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AGENTNS_MOCK_FILE", str(tmp_path / "no-such-mock"))
    monkeypatch.setenv("AGENTNS_SESSION_PATH", str(tmp_path / "agent_session"))
    return tmp_path / "agent_session"


def test_ensure_establishes_in_this_process_and_exports_the_session(
    agentns_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentc.supervisor.config import SupervisorConfig

    monkeypatch.setenv("AGENTNS_BUDGET_ENFORCED", "wall")  # an outer launch's claim
    session = agentsession.ensure(SupervisorConfig(), "reviewer")
    assert (session.intent, session.mode) == ("headless:reviewer", "synth-fallback")
    assert HEX32.fullmatch(session.session_id)
    assert {k: os.environ[k] for k in session.env()} == session.env()
    assert "AGENTNS_BUDGET_ENFORCED" not in os.environ
    assert capsys.readouterr().err.count("WARNING: kernel does not support") == 1
    # Now in its session: a second call keeps it and says nothing.
    assert agentsession.ensure(SupervisorConfig(), "reviewer") == session
    assert capsys.readouterr().err == ""
    unshared = agentsession.ensure(SupervisorConfig(agentns_no_unshare=True), "implementer")
    assert unshared.mode == "no-unshare" and unshared.session_id != session.session_id


def test_ensure_runs_the_prctl_rung_and_turns_its_errors_into_a_refusal(
    agentns_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentc.supervisor.config import SupervisorConfig

    agentns_env.write_text(KERNEL_ID + "\n")
    monkeypatch.setenv("AGENTNS_ASSAY_MOCK_VERDICT", "Live")
    monkeypatch.setenv("AGENTNS_PRCTL_MOCK_ERRNO", "EPERM")
    with pytest.raises(SupervisorError, match=r"^agent session headless:implementer: prctl"):
        agentsession.ensure(SupervisorConfig(), "implementer")
    assert "AGENTNS_SESSION_ID" not in os.environ
    monkeypatch.setenv("AGENTNS_PRCTL_MOCK_ERRNO", "0")
    session = agentsession.ensure(SupervisorConfig(), "implementer")
    assert (session.session_id, session.mode) == (KERNEL_ID, "prctl")
    # A forged claim (not the namespace procfs names) is not kept: a new session replaces it.
    monkeypatch.setenv("AGENTNS_SESSION_ID", "ab" * 16)
    monkeypatch.setenv("AGENTNS_ASSAY_MOCK_VERDICT", "Broken")
    forged = agentsession.ensure(SupervisorConfig(), "implementer")
    assert forged.mode == "synth-fallback" and os.environ["AGENTNS_SESSION_ID"] == forged.session_id
