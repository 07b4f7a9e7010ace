"""``agentc up`` refuses bad input with a clear message and a non-zero exit, and creates
nothing: a --repo that is not a git repository, a busy port, a harness that is not installed,
an unwritable state directory, a directory it did not make."""

from __future__ import annotations

import os
import pwd
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, free_port


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    return Runner(tmp_path)


def _nothing_made(runner: Runner) -> None:
    assert not (runner.workdir / ".agentc").exists()


def test_a_repo_that_is_not_a_git_repository(runner: Runner) -> None:
    plain = runner.workdir / "plain"
    plain.mkdir()
    done = runner.run("up", "--repo", str(plain), "--check", "true", "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    assert f"--repo {plain}: not a git repository" in done.stderr
    assert "Traceback" not in done.stderr
    _nothing_made(runner)


def test_a_repo_without_a_check_is_refused(runner: Runner) -> None:
    repo = runner.workdir / "repo"
    repo.mkdir()
    done = runner.run("up", "--repo", str(repo), "--port", str(free_port()))
    assert done.returncode == 2 and "--check: name the command" in done.stderr
    _nothing_made(runner)


def test_a_busy_port(runner: Runner) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = runner.run("up", "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert f"--port {port}: the port is busy" in done.stderr
    _nothing_made(runner)


@pytest.mark.parametrize("harness", ["codex", "command:/nonexistent/agent", "gpt"])
def test_a_harness_that_is_not_installed(runner: Runner, harness: str) -> None:
    done = runner.run("up", "--harness", harness, "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    expected = {
        "codex": "`codex` is not installed (not on PATH); install it with",
        "command:/nonexistent/agent": "/nonexistent/agent is not an executable file",
        "gpt": "use example, claude, codex, pi or command:<path>",
    }[harness]
    assert expected in done.stderr
    _nothing_made(runner)


def test_a_directory_agentc_up_did_not_make(runner: Runner) -> None:
    state = runner.workdir / "mine"
    state.mkdir()
    (state / "notes.txt").write_text("keep me\n")
    done = runner.run("up", "--state-dir", str(state), "--port", str(free_port()))
    assert done.returncode == 2 and "not empty and holds no up.json" in done.stderr
    assert sorted(p.name for p in state.iterdir()) == ["notes.txt"]


@pytest.fixture
def user() -> Iterator[str]:
    name = create_user("agentc-u")
    try:
        yield name
    finally:
        delete_user(name)


@pytest.mark.root
def test_an_unwritable_state_directory(user: str) -> None:
    home = Path(pwd.getpwnam(user).pw_dir)
    locked = Path(tempfile.mkdtemp(prefix="agentc-locked-"))  # root's: the user cannot write
    os.chmod(locked, 0o755)  # noqa: S103 - the user may look, not write
    runner = Runner(home, user)
    done = runner.run("up", "--state-dir", str(locked / "state"), "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    assert f"{locked} is not writable by this user" in done.stderr
    assert not (locked / "state").exists()
    os.rmdir(locked)


def test_status_before_any_up(runner: Runner) -> None:
    done = runner.run("status", "--json")
    assert done.returncode == 2 and "no agentc up here yet" in done.stderr
