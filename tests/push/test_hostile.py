"""Hostile clients and requests: other launches, named refs, planted secrets, junk, floods."""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentc.push.helper import read_events
from agentc.push.protocol import NOT_LAUNCH, Refused, publish
from tests.push.kit import (
    LAUNCH,
    TASK,
    Helper,
    bundle_of,
    commit,
    git,
    header,
    raw,
    remote_ref,
    start_helper,
)

CANDIDATE = f"refs/agent-coordinator/candidates/{TASK}/{LAUNCH}"
# Assembled, so this file itself carries no armour line.
BEGIN_KEY = "-----BEGIN " + "OPENSSH PRIVATE KEY-----"
END_KEY = "-----END " + "OPENSSH PRIVATE KEY-----"
# A launch root: for each socket path on stdin, a child process connects, sends a junk header and
# prints the helper's answer line.
ROOT = r"""
import subprocess, sys
CLIENT = '''
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(20); s.connect(sys.argv[1])
try:
    s.sendall(b"junk" + bytes([10])); s.shutdown(socket.SHUT_WR)
except OSError:
    pass
print(s.recv(65536).decode().strip())
'''
for line in sys.stdin:
    out = subprocess.run([sys.executable, "-c", CLIENT, line.strip()], capture_output=True,
                         text=True, timeout=30)
    print(out.stdout.strip() or out.stderr.strip(), flush=True)
"""


@pytest.fixture
def token() -> str:
    return secrets.token_hex(32)


@pytest.fixture
def guarded(base: Path, remote: Path, token: str) -> Iterator[Helper]:
    """A helper told the digest of ``token``."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    started = start_helper(base, remote, f"--known-digest={digest}")
    yield started
    started.stop()


def test_a_process_outside_the_launch_is_refused_unread(base: Path, remote: Path) -> None:
    outsider_root = subprocess.Popen(["sleep", "60"])
    helper = start_helper(base, remote, parent_pid=outsider_root.pid)
    try:
        # Nothing is sent: the refusal comes before the helper reads a byte.
        assert raw(helper.socket, b"", shut=False) == {"ok": False, "error": NOT_LAUNCH}
        rev = commit(base / "checkout", {"f": "f\n"})
        with pytest.raises(Refused, match="not from this helper's launch"):
            publish(helper.socket, "candidate", rev, base / "checkout", timeout=30)
        assert not (helper.work / "repo").exists()
        assert remote_ref(remote, CANDIDATE) is None
        assert NOT_LAUNCH in helper.log()
    finally:
        helper.stop()
        outsider_root.kill()
        outsider_root.wait(timeout=5)


def test_each_helper_serves_only_its_own_launch(base: Path, remote: Path) -> None:
    """Two launches of the same user: a client in launch A reaches A's helper, not B's."""
    roots = []
    helpers = []
    try:
        for name in ("a", "b"):
            root = subprocess.Popen(
                [sys.executable, "-c", ROOT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            roots.append(root)
            (base / name).mkdir()
            helpers.append(start_helper(base / name, remote, parent_pid=root.pid))
        root_a = roots[0]
        assert root_a.stdin is not None and root_a.stdout is not None
        answers = []
        for helper in helpers:
            root_a.stdin.write(f"{helper.socket}\n")
            root_a.stdin.flush()
            answers.append(root_a.stdout.readline())
        assert "malformed request header" in answers[0]
        assert NOT_LAUNCH in answers[1]
    finally:
        for helper in helpers:
            helper.stop()
        for root in roots:
            root.kill()
            root.communicate(timeout=5)


def test_a_request_cannot_name_a_ref(helper: Helper, checkout: Path) -> None:
    rev = git(checkout, "rev-parse", "HEAD")
    answer = raw(helper.socket, header("candidate", rev, ref="refs/heads/main"))
    assert answer["ok"] is False
    assert "unknown request field(s) 'ref'" in str(answer["error"])
    answer = raw(helper.socket, header("candidate", rev, note="x"))
    assert "unknown request field(s) 'note'" in str(answer["error"])
    assert "op must be" in str(raw(helper.socket, header("push", rev))["error"])
    assert "full commit id" in str(raw(helper.socket, header("wip", "HEAD"))["error"])
    assert "full commit id" in str(raw(helper.socket, header("wip", rev.upper()))["error"])


def test_malformed_and_oversized_headers_are_refused(helper: Helper) -> None:
    assert "not a JSON line" in str(raw(helper.socket, b"{not json\n")["error"])
    assert "not a JSON object" in str(raw(helper.socket, b"[1, 2]\n")["error"])
    assert "exceeds 4096 bytes" in str(raw(helper.socket, b"x" * 10000)["error"])
    assert "ended before" in str(raw(helper.socket, b'{"op": "wip"')["error"])


def test_bad_bundles_are_refused(helper: Helper, checkout: Path, base: Path) -> None:
    rev = commit(checkout, {"f.txt": "f\n"})
    other = commit(checkout, {"g.txt": "g\n"})
    assert "no bundle" in str(raw(helper.socket, header("candidate", rev))["error"])
    junk = raw(helper.socket, header("candidate", rev) + b"not a bundle at all\n")
    assert "not a valid git bundle" in str(junk["error"])
    wrong = raw(helper.socket, header("candidate", rev) + bundle_of(checkout, other, base / "b"))
    assert f"does not carry {rev}" in str(wrong["error"])


def test_an_oversized_bundle_is_refused(base: Path, remote: Path, checkout: Path) -> None:
    helper = start_helper(base, remote, "--max-bundle-bytes=4096")
    try:
        rev = commit(checkout, {"blob.bin": os.urandom(64 * 1024)})
        with pytest.raises(Refused, match="exceeds 4096 bytes"):
            publish(helper.socket, "candidate", rev, checkout, timeout=30)
        assert remote_ref(remote, CANDIDATE) is None
    finally:
        helper.stop()


def test_a_stalled_client_times_out(base: Path, remote: Path, checkout: Path) -> None:
    helper = start_helper(base, remote, "--io-timeout=0.5")
    try:
        answer = raw(helper.socket, b'{"op": ', shut=False, timeout=10)
        assert "timed out" in str(answer["error"])
        rev = commit(checkout, {"f": "f\n"})
        assert publish(helper.socket, "candidate", rev, checkout, timeout=30)["ok"] is True
    finally:
        helper.stop()


def test_a_planted_token_is_refused_by_path(
    guarded: Helper, remote: Path, checkout: Path, token: str
) -> None:
    rev = commit(checkout, {"deploy/settings.toml": f'[coordinator]\ntoken = "{token}"\n'})
    with pytest.raises(Refused) as refused:
        publish(guarded.socket, "candidate", rev, checkout, timeout=30)
    message = str(refused.value)
    assert f"deploy/settings.toml in commit {rev} carries a known token" in message
    assert token not in message and token not in guarded.log()
    assert remote_ref(remote, CANDIDATE) is None


def test_a_token_in_history_only_is_refused(
    guarded: Helper, remote: Path, checkout: Path, token: str
) -> None:
    leaked = commit(checkout, {"notes.txt": f"curl -H 'Authorization: Bearer {token}'\n"})
    (checkout / "notes.txt").unlink()
    rev = commit(checkout, {"other.txt": "clean\n"}, "remove the notes")
    with pytest.raises(Refused, match=f"notes.txt in commit {leaked} carries a known token"):
        publish(guarded.socket, "wip", rev, checkout, timeout=30)
    assert remote_ref(remote, f"{CANDIDATE.replace(TASK, 'wip/' + TASK)}/{rev}") is None


def test_a_token_in_a_message_or_a_file_name_is_refused(
    guarded: Helper, checkout: Path, token: str
) -> None:
    rev = commit(checkout, {}, f"debug with AGENT_TOKEN={token}")
    with pytest.raises(Refused, match=f"commit {rev} \\(message or author\\) carries a known"):
        publish(guarded.socket, "candidate", rev, checkout, timeout=30)
    git(checkout, "reset", "--quiet", "--hard", "HEAD~1")
    rev = commit(checkout, {f"cache/{token}.json": "{}\n"})
    with pytest.raises(Refused) as refused:
        publish(guarded.socket, "candidate", rev, checkout, timeout=30)
    assert f"a file name in commit {rev} carries a known token" in str(refused.value)
    assert token not in str(refused.value)


def test_a_private_key_is_refused(helper: Helper, remote: Path, checkout: Path) -> None:
    key = f"{BEGIN_KEY}\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n{END_KEY}\n"
    rev = commit(checkout, {"keys/id_ed25519": key})
    with pytest.raises(Refused, match=f"keys/id_ed25519 in commit {rev} carries a private key"):
        publish(helper.socket, "candidate", rev, checkout, timeout=30)
    assert remote_ref(remote, CANDIDATE) is None


def test_a_clean_candidate_passes_the_scan(guarded: Helper, remote: Path, checkout: Path) -> None:
    other = secrets.token_hex(32)
    rev = commit(checkout, {"config.toml": f'token = "{other}"\n', "doc.md": "BEGIN KEY\n"})
    assert publish(guarded.socket, "candidate", rev, checkout, timeout=30)["revision"] == rev
    assert remote_ref(remote, CANDIDATE) == rev


def test_each_push_is_one_event_line_whatever_the_request_holds(
    base: Path, remote: Path, checkout: Path
) -> None:
    """The launch's event log reads the helper's own record of its pushes (``--events``): a
    request whose refusal quotes a line break cannot forge an event, there or in the log."""
    events = base / "work" / "events.jsonl"
    helper = start_helper(base, remote, f"--events={events}")
    try:
        rev = commit(checkout, {"ok.txt": "ok\n"})
        forged = '\n{"event": "push", "ok": true, "ref": "refs/heads/main"}\nagentc-push: event'
        answer = raw(helper.socket, header("candidate", rev, **{forged: "x"}))
        assert answer["ok"] is False
        assert publish(helper.socket, "candidate", rev, checkout, timeout=60)["ok"] is True
    finally:
        helper.stop()
    pushed = read_events(events)
    assert [(e["ok"], e.get("ref")) for e in pushed] == [(False, None), (True, CANDIDATE)]
    assert "unknown request field(s)" in pushed[0]["error"]
    assert events.read_text().count("\n") == 2
    assert all(line.startswith("agentc-push: ") for line in helper.log().splitlines())
    assert os.stat(events).st_mode & 0o777 == 0o600
