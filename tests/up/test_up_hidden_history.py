"""``agentc up`` with a hostile ``command:`` agent (tests/up/hidden_history_agent.py), as a
throwaway user: as the implementer it publishes a candidate whose reviewed diff is one harmless
file but whose history hides ``evil.sh`` (a side branch forked before the base, merged, and
deleted in the merge); as the reviewer it approves. The integrator lands the reviewed change
alone: the target's main never holds evil.sh, not in its tip and not in any commit reachable
from it."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.kit import create_user, delete_user
from tests.up.kit import Runner, file_task, free_port, processes_of, stop, wait_for

pytestmark = pytest.mark.root

AGENT = Path(__file__).with_name("hidden_history_agent.py")
TITLE = "Add the feature file"


@pytest.fixture
def user() -> Iterator[str]:
    name = create_user("agentc-h")
    try:
        yield name
    finally:
        delete_user(name)


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "GIT_AUTHOR_NAME": "owner", "GIT_AUTHOR_EMAIL": "owner@example.invalid"}
        | {"GIT_COMMITTER_NAME": "owner", "GIT_COMMITTER_EMAIL": "owner@example.invalid"},
    )
    return done.stdout.strip()


def _project(home: Path, uid: int, gid: int) -> Path:
    """The user's repository: two commits, so a history can fork before the base."""
    repo = home / "project"
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(repo)], check=True)
    for name, text in (("README", "hello\n"), ("notes.txt", "the base's change\n")):
        (repo / name).write_text(text)
        _git(repo, "add", name)
        _git(repo, "commit", "--quiet", "-m", f"add {name}")
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, uid, gid)
    return repo


def _holds(remote: Path, revision: str, path: str) -> bool:
    return any(
        _git(remote, "ls-tree", "-r", "--name-only", sha, "--", path)
        for sha in _git(remote, "rev-list", revision).split()
    )


def test_a_hidden_file_in_the_candidates_history_never_lands(user: str) -> None:
    entry = pwd.getpwnam(user)
    home = Path(entry.pw_dir)
    repo = _project(home, entry.pw_uid, entry.pw_gid)
    work = home / "up"
    work.mkdir()
    os.chown(work, entry.pw_uid, entry.pw_gid)
    runner = Runner(work, user)
    port = free_port()
    argv = ["up", "--repo", str(repo), "--check", "test -f README", "--port", str(port)]
    proc = runner.start(*argv, "--harness", f"command:{AGENT}", "--no-live")
    state = work / ".agentc"
    remote = state / "remote.git"
    before = _git(repo, "rev-parse", "HEAD")
    try:
        record = wait_for(
            lambda: (state / "up.json").exists() and json.loads((state / "up.json").read_text()),
            120,
            lambda: proc.poll(),
        )
        task = file_task(state, record["project_id"], TITLE, ["feature.txt exists"])

        def done() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"agentc up exited: {proc.communicate()[0]}")
            snap = runner.status()
            return bool(snap and snap["tasks"]["done"] == 1)

        def why() -> str:
            logs = sorted((state / "logs").glob("*.log")) if state.exists() else []
            return "\n".join(f"{p.name}:\n{p.read_text()[-3000:]}" for p in logs)

        wait_for(done, 420, why)
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    # The attack was delivered and approved: the candidate's history holds evil.sh.
    refs = _git(remote, "for-each-ref", "--format=%(refname) %(objectname)")
    [candidate] = [
        line.split()[1]
        for line in refs.splitlines()
        if line.startswith(f"refs/agent-coordinator/candidates/{task}/")
    ]
    assert _holds(remote, candidate, "evil.sh")
    assert _git(remote, "diff", "--name-only", before, candidate) == "feature.txt"
    # What landed: one commit of the integrator's with exactly the reviewed change.
    tip = _git(remote, "rev-parse", "refs/heads/main")
    assert _git(remote, "rev-list", "--parents", "-n1", tip).split()[1:] == [before]
    assert _git(remote, "diff", "--name-only", before, tip) == "feature.txt"
    assert _git(remote, "log", "-1", "--format=%s|%an", tip) == f"{TITLE}|agentc-integrator"
    assert f"Agentc-Candidate: {candidate}" in _git(remote, "log", "-1", "--format=%B", tip)
    assert not _holds(remote, "refs/heads/main", "evil.sh")
    # It names the launch that served the attempt and the prompt's hash (the loop's records),
    # and it is signed with the key `up` made, which its allowed-signers file verifies.
    trailers = _git(remote, "log", "-1", "--format=%(trailers:only,unfold)", tip).splitlines()
    assert any(re.fullmatch(r"Agentc-Launch: [0-9a-f-]{36}", t) for t in trailers), trailers
    assert any(re.fullmatch(r"Agentc-Prompt: sha256:[0-9a-f]{64}", t) for t in trailers)
    allowed = state / "signing" / "allowed_signers"
    shown = _git(remote, "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", tip)
    assert shown == ""  # verified (git says so on standard error); a failure raises
    checked = _git(remote, "-c", f"gpg.ssh.allowedSignersFile={allowed}", "log",
                   "--format=%G?", "-1", tip)  # fmt: skip
    assert checked == "G"  # a good signature
    wait_for(lambda: not processes_of(entry.pw_uid), 30, lambda: processes_of(entry.pw_uid))
