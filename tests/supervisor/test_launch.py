"""Real launches through ``agentc-supervisor launch``: markers, stdin, env, fds, outcomes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from agentc.supervisor.launch.execute import Outcome, translate_status
from tests.supervisor.kit import Kit, terminal


def test_markers_are_fresh_private_and_the_prompt_hash_is_recorded(kit: Kit) -> None:
    prompt = "echo out; echo err >&2; exit 0\n"
    run, clone = kit.new_run(prompt)
    result = kit.launch(run, clone)
    assert result.returncode == 0, result.stderr
    for name in (".state-started", ".state-terminal.json", "events.jsonl", "stderr.log"):
        info = os.lstat(run / name)
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600, name
    started = json.loads((run / ".state-started").read_text())
    assert started["prompt_sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    assert (run / "events.jsonl").read_text() == "out\n"
    assert (run / "stderr.log").read_text() == "err\n"
    end = terminal(run)
    assert (end["reason"], end["exit_code"], end["signal"]) == ("exited", 0, None)
    assert json.loads(result.stdout.splitlines()[-1])["reason"] == "exited"


def test_a_started_run_is_never_reused(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    assert kit.launch(run, clone).returncode == 0
    before = sorted(os.listdir(run))
    again = kit.launch(run, clone)
    assert again.returncode == 1
    assert "use a fresh run directory" in again.stderr
    assert "Traceback" not in again.stderr
    assert sorted(os.listdir(run)) == before


def test_a_planted_symlink_marker_is_refused_and_not_followed(kit: Kit, tmp_path: Path) -> None:
    run, clone = kit.new_run("exit 0\n")
    target = tmp_path / "victim"
    os.symlink(target, run / "events.jsonl")
    result = kit.launch(run, clone)
    assert result.returncode == 1 and "fresh run directory" in result.stderr
    assert not target.exists()


def test_bad_input_leaves_no_half_written_run(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    (kit.role_dir("implementer") / "claude-token").write_text("has space in it\n")
    result = kit.launch(run, clone)
    assert result.returncode == 1
    assert "token file" in result.stderr and "has space" not in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(os.listdir(run)) == ["prompt.md"]


@pytest.mark.parametrize("harness", ["codex", "pi"])
def test_a_reviewer_that_cannot_be_confined_is_refused(kit: Kit, harness: str) -> None:
    run, clone = kit.new_run("exit 0\n", "reviewer")
    result = kit.launch(run, clone, f"--harness={harness}", role="reviewer")
    assert result.returncode != 0
    assert f"a {harness} reviewer cannot have its commands confined" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(os.listdir(run)) == ["prompt.md"]


def test_oversized_prompt_is_refused_naming_16_mib(kit: Kit) -> None:
    run, clone = kit.new_run(b"#" * (16 * 1024 * 1024 + 1))
    result = kit.launch(run, clone)
    assert result.returncode == 1 and "16 MiB" in result.stderr
    assert sorted(os.listdir(run)) == ["prompt.md"]


def test_a_16_mib_prompt_is_accepted(kit: Kit) -> None:
    body = b"exit 0\n" + b"#" * (16 * 1024 * 1024 - 7)
    run, clone = kit.new_run(body)
    assert kit.launch(run, clone).returncode == 0


def test_stdin_is_a_sealed_memfd(kit: Kit) -> None:
    script = (
        'readlink /proc/self/fd/0 | grep -q "^/memfd:agentc-prompt" || exit 11\n'
        "echo x >> /proc/self/fd/0 && exit 12\n"
        "exit 0\n"
    )
    run, clone = kit.new_run(script)
    assert kit.launch(run, clone).returncode == 0
    assert (run / "prompt.md").read_text() == script


def test_environment_is_built_from_scratch(kit: Kit) -> None:
    run, clone = kit.new_run("env > $HOME/env.txt\n")
    argv = kit.argv(run, clone)
    env = {"PATH": "/usr/bin:/bin", "LEAKY_SECRET": "s3cr3t", "ANTHROPIC_API_KEY": "k"}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    seen = dict(
        line.split("=", 1) for line in (run / "state/home/env.txt").read_text().splitlines()
    )
    assert "LEAKY_SECRET" not in seen and "ANTHROPIC_API_KEY" not in seen
    assert seen["HOME"] == str(run / "state/home")
    assert seen["TMPDIR"] == str(run / "tmp")
    assert seen["AGENTC_TEST_NESTED_SANDBOX"] == "1"
    token = (kit.role_dir("implementer") / "claude-token").read_text().strip()
    assert seen["CLAUDE_CODE_OAUTH_TOKEN"] == token


def test_dry_run_never_shows_the_token(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    result = kit.launch(run, clone, "--dry-run")
    assert result.returncode == 0
    token = (kit.role_dir("implementer") / "claude-token").read_text().strip()
    assert token not in result.stdout
    assert json.loads(result.stdout)["program"] == "/usr/bin/bwrap"
    assert sorted(os.listdir(run)) == ["prompt.md"]


def test_no_new_privs_no_capabilities_and_no_inherited_fds(kit: Kit) -> None:
    script = (
        "grep -q '^NoNewPrivs:\t1' /proc/self/status || exit 11\n"
        "grep -q '^CapEff:\t0000000000000000' /proc/self/status || exit 12\n"
        "grep -q '^CapBnd:\t0000000000000000' /proc/self/status || exit 13\n"
        "ls -l /proc/$$/fd/ /proc/self/fd/ > $HOME/fds\n"
        "exit 0\n"
    )
    run, clone = kit.new_run(script)
    leak = os.open("/etc/hostname", os.O_RDONLY)  # inheritable in the launching process
    os.set_inheritable(leak, True)
    try:
        argv = kit.argv(run, clone)
        result = subprocess.run(argv, capture_output=True, text=True, pass_fds=(leak,), timeout=60)
    finally:
        os.close(leak)
    assert result.returncode == 0, result.stderr
    listing = (run / "state/home/fds").read_text()
    assert "memfd:agentc-prompt" in listing  # the listing is real
    assert "/etc/hostname" not in listing


@pytest.mark.parametrize(
    ("status", "reason", "code", "sig"),
    [
        (0, "exited", 0, None),
        (3, "failed", 3, None),
        (128, "failed", 128, None),
        (129, "killed", None, "SIGHUP"),
        (137, "killed", None, "SIGKILL"),
        (143, "killed", None, "SIGTERM"),
        (-9, "killed", None, "SIGKILL"),
        (200, "failed", 200, None),
    ],
)
def test_status_translation(status: int, reason: str, code: int | None, sig: str | None) -> None:
    out = translate_status(status)
    assert (out.reason, out.exit_code, out.signal) == (reason, code, sig)


def test_harness_killed_by_a_signal_ends_killed_not_failed(kit: Kit) -> None:
    run, clone = kit.new_run("kill -TERM $$\n")
    result = kit.launch(run, clone)
    assert result.returncode == 128 + signal.SIGTERM
    end = terminal(run)
    assert (end["reason"], end["exit_code"], end["signal"]) == ("killed", None, "SIGTERM")


def test_harness_failure_ends_failed_with_its_code(kit: Kit) -> None:
    run, clone = kit.new_run("exit 7\n")
    assert kit.launch(run, clone).returncode == 7
    assert terminal(run)["reason"] == "failed" and terminal(run)["exit_code"] == 7


def _target_pid(launch_pid: int, target: str) -> int:
    """The harness (``sleep``) or the runner: the outer bwrap's child, the sandbox's pid 1."""
    from agentc.sandbox.reaper import descendants

    found = descendants(launch_pid)
    if target == "harness":
        [pid] = [p for p, (comm, _s) in found.items() if comm == "sleep"]
        return pid
    [outer] = [p for p in descendants(launch_pid) if p not in _grandchildren(launch_pid)]
    [runner] = list(_children(outer))
    return runner


def _children(pid: int) -> list[int]:
    from agentc.sandbox.reaper import descendants

    return [p for p in descendants(pid) if p not in _grandchildren(pid)]


def _grandchildren(pid: int) -> set[int]:
    from agentc.sandbox.reaper import descendants

    below = descendants(pid)
    return {g for c in below for g in descendants(c)}


@pytest.mark.parametrize("target", ["runner", "harness"])
def test_sigkill_from_the_host_ends_the_launch_killed_with_sigkill(kit: Kit, target: str) -> None:
    run, clone = kit.new_run("echo ready > $TMPDIR/ready; exec sleep 3000\n")
    proc = subprocess.Popen(kit.argv(run, clone), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (run / "tmp/ready").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        os.kill(_target_pid(proc.pid, target), signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGKILL, err
    end = terminal(run)
    assert (end["reason"], end["exit_code"], end["signal"]) == ("killed", None, "SIGKILL")
    assert json.loads(out.decode().splitlines()[-1])["signal"] == "SIGKILL"


def test_leftover_processes_are_gone_when_the_run_is_terminal(kit: Kit) -> None:
    tag = f"{os.getpid()}.{time.monotonic_ns() % 100000}"
    script = f"(setsid sh -c 'sleep {tag}1 & sleep {tag}2' &) ; sleep 0.2; exit 0\n"
    run, clone = kit.new_run(script)
    result = kit.launch(run, clone)
    assert result.returncode == 0, result.stderr
    assert (run / ".state-terminal.json").exists()
    left = subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True, text=True)
    assert left.stdout == ""
    # Exactly one stderr line from the reaper.
    assert len([ln for ln in result.stderr.splitlines() if "launch process" in ln]) == 1


@pytest.mark.parametrize(
    ("reason", "code", "sig", "status"),
    [
        ("exited", 0, None, 0),
        ("failed", 3, None, 3),
        ("failed", 255, None, 255),
        ("failed", 256, None, 1),
        ("failed", -1, None, 1),
        ("killed", None, "SIGTERM", 143),
        ("killed", None, "SIGHUP", 129),
        ("killed", None, None, 137),  # a kill without a recorded signal reads as SIGKILL
    ],
)
def test_shell_status(reason: str, code: int | None, sig: str | None, status: int) -> None:
    assert Outcome(reason, code, sig).shell_status == status
