"""Publishing candidates and WIP checkpoints through a real helper into a real bare remote."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentc.push.protocol import HelperTimeout, HelperUnavailable, Refused, publish
from tests.push.kit import LAUNCH, TASK, Helper, commit, git, remote_ref, start_helper

CANDIDATE = f"refs/agent-coordinator/candidates/{TASK}/{LAUNCH}"
WIP = f"refs/agent-coordinator/candidates/wip/{TASK}/{LAUNCH}"


def test_socket_is_0660_and_work_dir_private(helper: Helper) -> None:
    mode = helper.socket.lstat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660
    assert sorted(p.name for p in helper.socket.parent.iterdir()) == ["push.sock"]


def test_candidate_lands_on_the_derived_ref(helper: Helper, remote: Path, checkout: Path) -> None:
    rev = commit(checkout, {"src/app.py": "print('hi')\n"})
    refs = git(checkout, "for-each-ref")
    answer = publish(helper.socket, "candidate", rev, checkout, timeout=60)
    assert answer == {"ok": True, "ref": CANDIDATE, "revision": rev}
    assert remote_ref(remote, CANDIDATE) == rev
    assert git(checkout, "status", "--porcelain") == ""
    assert git(checkout, "for-each-ref") == refs  # the checkout is left as it was
    assert stat.S_IMODE((helper.work / "repo").stat().st_mode) == 0o700
    hooks = subprocess.run(
        ["git", "--git-dir", str(helper.work / "repo"), "config", "core.hooksPath"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert hooks.stdout.strip() == "/dev/null"


def test_same_candidate_again_is_ok(helper: Helper, remote: Path, checkout: Path) -> None:
    """The second answer comes before the helper reads the 4 MiB bundle the client is sending."""
    rev = commit(checkout, {"a.bin": os.urandom(4 * 1024 * 1024)})
    first = publish(helper.socket, "candidate", rev, checkout, timeout=60)
    again = publish(helper.socket, "candidate", rev, checkout, timeout=60)
    assert first == again == {"ok": True, "ref": CANDIDATE, "revision": rev}
    assert remote_ref(remote, CANDIDATE) == rev


def test_candidate_is_never_moved(helper: Helper, remote: Path, checkout: Path) -> None:
    first = commit(checkout, {"a.txt": "a\n"})
    publish(helper.socket, "candidate", first, checkout, timeout=60)
    second = commit(checkout, {"a.txt": "b\n"})
    with pytest.raises(Refused, match="never moved"):
        publish(helper.socket, "candidate", second, checkout, timeout=60)
    assert remote_ref(remote, CANDIDATE) == first
    # Even with the remote ref deleted behind its back, the helper does not publish another.
    git(remote, "update-ref", "-d", CANDIDATE)
    with pytest.raises(Refused, match=f"already {first}"):
        publish(helper.socket, "candidate", second, checkout, timeout=60)
    assert remote_ref(remote, CANDIDATE) is None


def test_existing_remote_candidate_is_not_replaced(
    helper: Helper, remote: Path, checkout: Path
) -> None:
    planted = commit(checkout, {"x": "x\n"})
    git(checkout, "push", "--quiet", "origin", f"{planted}:{CANDIDATE}")
    mine = commit(checkout, {"y": "y\n"})
    with pytest.raises(Refused, match=f"already holds {planted}"):
        publish(helper.socket, "candidate", mine, checkout, timeout=60)
    assert remote_ref(remote, CANDIDATE) == planted


def test_wip_refs_are_create_only_and_keep_the_candidate(
    helper: Helper, remote: Path, checkout: Path
) -> None:
    one = commit(checkout, {"w.txt": "1\n"})
    assert publish(helper.socket, "wip", one, checkout, timeout=60)["ref"] == f"{WIP}/{one}"
    assert publish(helper.socket, "wip", one, checkout, timeout=60)["ref"] == f"{WIP}/{one}"
    two = commit(checkout, {"w.txt": "2\n"})
    assert publish(helper.socket, "wip", two, checkout, timeout=60)["ref"] == f"{WIP}/{two}"
    assert remote_ref(remote, f"{WIP}/{one}") == one
    assert remote_ref(remote, f"{WIP}/{two}") == two
    assert publish(helper.socket, "candidate", two, checkout, timeout=60)["ref"] == CANDIDATE
    # A WIP ref someone moved on the remote is refused, not overwritten.
    three = commit(checkout, {"w.txt": "3\n"})
    git(checkout, "push", "--quiet", "origin", f"{one}:{WIP}/{three}")
    with pytest.raises(Refused, match="never moved"):
        publish(helper.socket, "wip", three, checkout, timeout=60)
    assert remote_ref(remote, f"{WIP}/{three}") == one


def test_full_bundle_when_the_remote_lacks_the_base(
    helper: Helper, remote: Path, checkout: Path, base: Path
) -> None:
    """The checkout's remote-tracking refs name commits the helper's remote does not have."""
    other = base / "other.git"
    git(base, "init", "--quiet", "--bare", str(other))
    side = commit(checkout, {"side.txt": "side\n"}, "only on another remote")
    git(checkout, "push", "--quiet", str(other), f"{side}:refs/heads/side")
    git(checkout, "remote", "add", "other", str(other))
    git(checkout, "fetch", "--quiet", "other")
    rev = commit(checkout, {"more.txt": "more\n"})
    assert publish(helper.socket, "candidate", rev, checkout, timeout=60)["revision"] == rev
    assert remote_ref(remote, CANDIDATE) == rev
    assert "bundle needs commits" in helper.log()


def test_publish_from_a_child_process(helper: Helper, remote: Path, checkout: Path) -> None:
    """A client in another process of the launch's tree (personal mode: the helper's parent)."""
    rev = commit(checkout, {"child.txt": "c\n"})
    code = (
        "import sys; from agentc.push.protocol import publish; "
        "print(publish(sys.argv[1], 'candidate', sys.argv[2], sys.argv[3], timeout=60)['ref'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(helper.socket), rev, str(checkout)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == CANDIDATE
    assert remote_ref(remote, CANDIDATE) == rev


def test_client_errors_are_clear(base: Path, checkout: Path) -> None:
    rev = git(checkout, "rev-parse", "HEAD")
    with pytest.raises(HelperUnavailable, match="not running"):
        publish(base / "nothing.sock", "candidate", rev, checkout, timeout=5)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(str(base / "silent.sock"))
    silent.listen(1)
    try:
        with pytest.raises(HelperTimeout, match="within 1 s"):
            publish(base / "silent.sock", "candidate", rev, checkout, timeout=1)
    finally:
        silent.close()
        os.unlink(base / "silent.sock")


def test_two_racing_candidates_land_one(helper: Helper, remote: Path, checkout: Path) -> None:
    first = commit(checkout, {"r.txt": "1\n"})
    second = commit(checkout, {"r.txt": "2\n"})

    def attempt(rev: str) -> str:
        try:
            return str(publish(helper.socket, "candidate", rev, checkout, timeout=60)["revision"])
        except Refused:
            return "refused"

    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(attempt, [first, second]))
    landed = remote_ref(remote, CANDIDATE)
    assert landed in (first, second)
    assert outcomes == sorted([landed, "refused"])


def test_content_the_remote_already_has_is_not_rescanned(
    base: Path, remote: Path, checkout: Path
) -> None:
    """A token already on the remote's main is not news; the new commit on top is clean."""
    token = secrets.token_hex(32)
    commit(checkout, {"old.cfg": f"token={token}\n"})
    git(checkout, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    rev = commit(checkout, {"new.txt": "clean\n"})
    digest = hashlib.sha256(token.encode()).hexdigest()
    helper = start_helper(base, remote, f"--known-digest={digest}")
    try:
        assert publish(helper.socket, "candidate", rev, checkout, timeout=60)["revision"] == rev
    finally:
        helper.stop()


def test_a_sha256_repository(base: Path) -> None:
    remote = base / "r256.git"
    git(base, "init", "--quiet", "--bare", "--object-format=sha256", str(remote))
    checkout = base / "c256"
    git(base, "init", "--quiet", "--object-format=sha256", str(checkout))
    git(checkout, "config", "user.name", "Agent")
    git(checkout, "config", "user.email", "agent@example.invalid")
    rev = commit(checkout, {"f.txt": "sha256\n"})
    assert len(rev) == 64
    helper = start_helper(base, remote)
    try:
        answer = publish(helper.socket, "candidate", rev, checkout, timeout=60)
        assert answer == {"ok": True, "ref": CANDIDATE, "revision": rev}
        assert remote_ref(remote, CANDIDATE) == rev
    finally:
        helper.stop()


def test_an_unreachable_remote_is_a_refusal_and_the_helper_stays(
    base: Path, checkout: Path
) -> None:
    helper = start_helper(base, base / "no-such-remote.git")
    try:
        rev = commit(checkout, {"f": "f\n"})
        for _ in range(2):
            with pytest.raises(Refused, match="cannot read the remote"):
                publish(helper.socket, "candidate", rev, checkout, timeout=60)
        assert helper.proc.poll() is None
    finally:
        helper.stop()
