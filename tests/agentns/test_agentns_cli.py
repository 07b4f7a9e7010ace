"""The command line, exec semantics and the exported variables (A-AC1, A-AC2, A-AC4, B-AC6)."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.agentns.kit import child_env, is_hex32


def test_version_prints_package_version(run):  # A-AC1
    r = run("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"agentns-claude {version('agentc')}"


def test_help_lists_flags_mock_contract_and_fallback(run):  # A-AC2
    r = run("--help")
    assert r.returncode == 0
    for flag in ("--intent", "--budget", "--no-unshare", "--verbose"):
        assert flag in r.stdout
    assert "AGENTNS_SESSION_ID_OVERRIDE" in r.stdout
    assert "/tmp/agentns-mock" in r.stdout
    assert "synth-fallback" in r.stdout and "stock kernel" in r.stdout


def test_echo_hi_prints_and_exits_zero(run):  # A-AC4
    r = run("--intent", "t", "--", "echo", "hi")
    assert r.returncode == 0
    assert r.stdout == "hi\n"


def test_false_exits_one(run):  # A-AC4
    assert run("--intent", "t", "--", "false").returncode == 1


def test_child_exit_code_passes_through(run):
    assert run("--intent", "t", "--", "sh", "-c", "exit 42").returncode == 42


def test_missing_program_exits_127_naming_exec(run):  # A-AC4
    r = run("--intent", "t", "--", "agentns-no-such-program-xyz")
    assert r.returncode == 127
    assert "agentns-claude: exec agentns-no-such-program-xyz: No such file" in r.stderr
    assert "Traceback" not in r.stderr


def test_non_executable_program_exits_126(run, tmp_path: Path):
    script = tmp_path / "not-exec.sh"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o644)
    r = run("--intent", "t", "--", str(script))
    assert r.returncode == 126
    assert f"agentns-claude: exec {script}: Permission denied" in r.stderr
    assert "never" not in r.stdout


def test_other_exec_failure_exits_2(run, tmp_path: Path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF-not-really")  # executable bit, but no valid format: ENOEXEC
    junk.chmod(0o755)
    r = run("--intent", "t", "--", str(junk))
    assert r.returncode == 2
    assert f"agentns-claude: exec {junk}: Exec format error" in r.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--", "true"], "--intent"),  # --intent missing
        (["--intent", "", "--", "true"], "--intent must be a non-empty tag"),
        (["--intent", "   ", "--", "true"], "--intent must be a non-empty tag"),
        (["--intent", "t"], "missing command"),
        (["--intent", "t", "--"], "missing command"),
        (["--intent", "t", "true"], "unrecognized arguments: true"),
        (["--intent", "t", "--bogus", "--", "true"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_command_lines_exit_2_without_traceback(run, args, needle):
    r = run(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert r.stdout == ""


def test_exported_variables_match_the_resolution(run):  # B-AC6
    r = run("--intent", "build", "--verbose", "--", "env")
    assert r.returncode == 0
    env = child_env(r.stdout)
    assert env["AGENTNS_INTENT"] == "build"
    assert env["AGENTNS_MODE"] == "synth-fallback"
    assert is_hex32(env["AGENTNS_SESSION_ID"])
    line = f"[agentns-claude] mode=synth-fallback session_id={env['AGENTNS_SESSION_ID']} "
    assert line + "intent=build" in r.stderr


def test_intent_is_exported_raw(run):
    r = run("--intent", " headless:coder ", "--", "env")
    assert child_env(r.stdout)["AGENTNS_INTENT"] == " headless:coder "


def test_no_budget_clears_inherited_budget_claims(run):
    r = run(
        "--intent",
        "t",
        "--",
        "env",
        env={"AGENTNS_BUDGET_ENFORCED": "wall", "AGENTNS_BUDGET_UNENFORCED": "fork"},
    )
    env = child_env(r.stdout)
    assert "AGENTNS_BUDGET_ENFORCED" not in env
    assert "AGENTNS_BUDGET_UNENFORCED" not in env


def test_two_launches_get_different_ids(run):
    ids = [
        child_env(run("--intent", "t", "--", "env").stdout)["AGENTNS_SESSION_ID"] for _ in range(2)
    ]
    assert all(is_hex32(i) for i in ids)
    assert ids[0] != ids[1]


def test_child_keeps_the_launcher_pid(launcher, base_env):
    # exec in place: the pid the caller spawned is the pid of the wrapped command.
    proc = subprocess.Popen(
        [launcher, "--intent", "t", "--", "sh", "-c", "echo $$"],
        env=base_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert int(out) == proc.pid


def test_signal_dispositions_are_restored_for_the_child(run):
    # Python ignores SIGPIPE and SIGXFSZ; an ignored signal survives exec unless restored.
    r = run("--intent", "t", "--", "cat", "/proc/self/status")
    ignored = int(next(x for x in r.stdout.splitlines() if x.startswith("SigIgn:")).split()[1], 16)
    assert not ignored & (1 << (13 - 1)), "SIGPIPE still ignored in the child"
    assert not ignored & (1 << (25 - 1)), "SIGXFSZ still ignored in the child"


def test_arguments_after_the_separator_reach_the_child_untouched(run):
    r = run("--intent", "t", "--", "printf", "%s|", "--intent", "--", "a b", "")
    assert r.stdout == "--intent|--|a b||"
