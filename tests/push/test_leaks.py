"""A hostile launch tries to push its coordinator token, in every encoding the scan decodes, and
the common secret formats, through the real helper into a real remote: each push is refused
naming the path (or the commit) and the encoding, nothing lands, and neither the answer nor
the helper's log holds anything of the secret."""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentc.core.secrets import verifier
from agentc.push.protocol import Refused, publish
from tests.core import kit
from tests.push.kit import LAUNCH, TASK, Helper, commit, git, remote_ref, start_helper

CANDIDATE = f"refs/agent-coordinator/candidates/{TASK}/{LAUNCH}"
WIP = f"refs/agent-coordinator/candidates/wip/{TASK}/{LAUNCH}"


@pytest.fixture
def token() -> str:
    return kit.token()


@pytest.fixture
def guarded(base: Path, remote: Path, token: str) -> Iterator[Helper]:
    """A helper told the verifier of ``token``, as the loop tells it the launch's."""
    started = start_helper(base, remote, f"--known-digest={verifier(token)}")
    yield started
    started.stop()


def _refused(helper: Helper, op: str, rev: str, checkout: Path) -> str:
    with pytest.raises(Refused) as refused:
        publish(helper.socket, op, rev, checkout, timeout=60)
    return str(refused.value)


@pytest.mark.parametrize("name", sorted(kit.ENCODINGS))
def test_the_launchs_token_is_refused_in_each_encoding(
    guarded: Helper, remote: Path, checkout: Path, token: str, name: str
) -> None:
    encode, label = kit.ENCODINGS[name]
    sent = encode(token)
    rev = commit(checkout, {"deploy/notes.txt": f"for later:\n{sent}\n"})
    message = _refused(guarded, "candidate", rev, checkout)
    how = "in plain text" if label == "plain" else f"encoded as {label}"
    assert message.endswith(f": deploy/notes.txt in commit {rev} carries a known token ({how})")
    assert remote_ref(remote, CANDIDATE) is None
    for text in (message, guarded.log()):
        assert token not in text and sent not in text
    # A WIP ref of the same commit is refused as well.
    assert "carries a known token" in _refused(guarded, "wip", rev, checkout)
    assert remote_ref(remote, f"{WIP}/{rev}") is None


def test_commit_messages_authors_and_path_names_are_scanned(
    guarded: Helper, remote: Path, checkout: Path, token: str
) -> None:
    b64 = base64.b64encode(token.encode()).decode()
    rev = commit(checkout, {}, f"debug\n\nexport TOKEN_B64={b64}\n")
    message = _refused(guarded, "candidate", rev, checkout)
    assert message.endswith(
        f": commit {rev} (message or author) carries a known token (encoded as base64(text))"
    )
    git(checkout, "reset", "--quiet", "--hard", "HEAD~1")
    secret = kit.FORMATS["a Slack token"]()
    git(checkout, "-c", f"user.name={secret}", "commit", "--quiet", "--allow-empty", "-m", "x")
    rev = git(checkout, "rev-parse", "HEAD")
    message = _refused(guarded, "candidate", rev, checkout)
    assert message.endswith("(message or author) carries a Slack token (in plain text)")
    git(checkout, "reset", "--quiet", "--hard", "HEAD~1")
    name = base64.urlsafe_b64encode(bytes.fromhex(token)).decode().rstrip("=")
    rev = commit(checkout, {f"cache/{name}.json": "{}\n"})
    message = _refused(guarded, "candidate", rev, checkout)
    assert message.endswith(
        f": a file name in commit {rev} carries a known token (encoded as base64(raw bytes))"
    )
    for text in (message, guarded.log()):
        assert token not in text and b64 not in text and name not in text and secret not in text
    assert remote_ref(remote, CANDIDATE) is None


@pytest.mark.parametrize("kind", sorted(kit.FORMATS))
def test_each_secret_format_is_refused(
    helper: Helper, remote: Path, checkout: Path, kind: str
) -> None:
    secret = kit.FORMATS[kind]()
    rev = commit(checkout, {"config/app.env": f"KEY={secret}\n"})
    message = _refused(helper, "candidate", rev, checkout)
    assert message.endswith(f": config/app.env in commit {rev} carries {kind} (in plain text)")
    assert secret not in helper.log()
    assert remote_ref(remote, CANDIDATE) is None


def test_a_large_blob_is_scanned_whole(
    guarded: Helper, remote: Path, checkout: Path, token: str
) -> None:
    """20 MiB of base64 (three of the scanner's windows) with the token encoded at its end; then
    the same blob without it passes."""
    body = base64.encodebytes(random.Random(24).randbytes(15 << 20))
    tail = base64.b64encode(f"token: {token}".encode())
    rev = commit(checkout, {"assets/blob.b64": body + tail + b"\n"})
    message = _refused(guarded, "candidate", rev, checkout)
    assert message.endswith(
        f": assets/blob.b64 in commit {rev} carries a known token (encoded as base64(text))"
    )
    git(checkout, "reset", "--quiet", "--hard", "HEAD~1")
    rev = commit(checkout, {"assets/blob.b64": body})
    assert publish(guarded.socket, "candidate", rev, checkout, timeout=120)["revision"] == rev
    assert remote_ref(remote, CANDIDATE) == rev
