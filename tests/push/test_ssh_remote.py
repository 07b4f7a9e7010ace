"""The push helper over a real ssh remote: an ``sshd`` on loopback serving a bare repository
through ``git-shell`` for a throwaway account, the helper pushing with a deploy key.

The host key is checked strictly against ``--known-hosts``: with the server's key listed the
candidate lands; with another key listed, or no file, the push is refused and nothing lands.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentc.push.protocol import Refused, publish
from tests.push.kit import LAUNCH, TASK, commit, git, make_repos, remote_ref, start_helper
from tests.supervisor.kit import delete_user

pytestmark = [
    pytest.mark.root,  # sshd switches to the repository's account
    pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="scripts/setup --dev"),
]

CANDIDATE = f"refs/agent-coordinator/candidates/{TASK}/{LAUNCH}"


@dataclass
class SshRemote:
    url: str
    repo: Path
    known_hosts: Path  # the server's host key, as ssh-keyscan would list it
    other_hosts: Path  # another host's key under the same address
    key: Path  # the deploy key the helper pushes with


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


@pytest.fixture
def ssh_remote(tmp_path: Path) -> Iterator[SshRemote]:
    name = f"agentc-git{os.urandom(3).hex()}"
    subprocess.run(
        ["useradd", "--create-home", "--shell", "/usr/bin/git-shell", "--user-group", name],
        check=True,
        capture_output=True,
    )
    sshd: subprocess.Popen[bytes] | None = None
    try:
        # No password, yet not locked: sshd (without PAM) refuses a locked account's keys.
        subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True)
        entry = pwd.getpwnam(name)
        (tmp_path / "seed").mkdir()
        seed, _checkout = make_repos(tmp_path / "seed")
        repo = Path(entry.pw_dir) / "remote.git"
        shutil.copytree(seed, repo)
        subprocess.run(["chown", "-R", f"{name}:{name}", str(repo)], check=True)
        # The server's files: root's, as sshd's strict modes want them.
        conf = tmp_path / "sshd"
        conf.mkdir(mode=0o755)
        host_pub = _keygen(conf / "host_key")
        other_pub = _keygen(conf / "other_host_key")
        client = tmp_path / "client"
        client.mkdir(mode=0o700)
        key_pub = _keygen(client / "deploy_key")
        # sshd reads the key list as the account: its own ~/.ssh, as StrictModes wants it.
        dot_ssh = Path(entry.pw_dir) / ".ssh"
        dot_ssh.mkdir(mode=0o700)
        authorized = dot_ssh / "authorized_keys"
        authorized.write_text(key_pub + "\n")
        authorized.chmod(0o600)
        subprocess.run(["chown", "-R", f"{name}:{name}", str(dot_ssh)], check=True)
        port = _free_port()
        (conf / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {conf / 'host_key'}\n"
            f"PidFile {conf / 'sshd.pid'}\nAuthorizedKeysFile .ssh/authorized_keys\n"
            f"AllowUsers {name}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes yes\nPermitRootLogin no\nLogLevel VERBOSE\n"
        )
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege separation root
        with (tmp_path / "sshd.log").open("wb") as log:
            sshd = subprocess.Popen(
                ["/usr/sbin/sshd", "-D", "-e", "-f", str(conf / "sshd_config")],
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert sshd.poll() is None, (tmp_path / "sshd.log").read_text()
                assert time.monotonic() < deadline, "sshd did not listen"
                time.sleep(0.05)
        known = client / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_pub}\n")
        other = client / "other_hosts"
        other.write_text(f"[127.0.0.1]:{port} {other_pub}\n")
        yield SshRemote(
            f"ssh://{name}@127.0.0.1:{port}{repo}", repo, known, other, client / "deploy_key"
        )
    finally:
        if sshd is not None:
            sshd.terminate()
            sshd.wait(timeout=10)
        delete_user(name)


def _publish_with(tmp_path: Path, remote: SshRemote, *extra: str) -> dict[str, object]:
    base = tmp_path / f"helper-{os.urandom(3).hex()}"
    (base / "work-repos").mkdir(parents=True)
    _remote, checkout = make_repos(base / "work-repos")
    # The candidate's history starts from the same base commit as the ssh remote's main.
    # The remote repository is the ssh account's: root reads it only when the upload-pack git
    # it starts for a local path is told it is safe (git drops a -c or its environment there).
    upload = f"--upload-pack=git -c safe.directory={remote.repo} upload-pack"
    git(checkout, "fetch", "--quiet", upload, str(remote.repo), "main")
    git(checkout, "reset", "--quiet", "--hard", "FETCH_HEAD")
    rev = commit(checkout, {"feature.txt": "over ssh\n"})
    helper = start_helper(base, remote.url, f"--ssh-key={remote.key}", *extra)
    try:
        try:
            return dict(publish(helper.socket, "candidate", rev, checkout, timeout=120))
        except Refused as refused:
            sshd_log = (tmp_path / "sshd.log").read_text(errors="replace")
            return {"ok": False, "error": str(refused), "log": helper.log(), "sshd": sshd_log}
    finally:
        helper.stop()


def test_the_candidate_lands_over_ssh_when_the_host_key_is_known(
    tmp_path: Path, ssh_remote: SshRemote
) -> None:
    answer = _publish_with(tmp_path, ssh_remote, f"--known-hosts={ssh_remote.known_hosts}")
    assert answer["ok"] is True, answer
    assert remote_ref(ssh_remote.repo, CANDIDATE) == answer["revision"]


@pytest.mark.parametrize("hosts", ["other", "none"])
def test_an_unknown_or_changed_host_key_is_refused(
    tmp_path: Path, ssh_remote: SshRemote, hosts: str
) -> None:
    extra = [f"--known-hosts={ssh_remote.other_hosts}"] if hosts == "other" else []
    answer = _publish_with(tmp_path, ssh_remote, *extra)
    assert answer["ok"] is False, answer
    assert "cannot read the remote: Host key verification failed." in str(answer["error"])
    assert remote_ref(ssh_remote.repo, CANDIDATE) is None  # nothing landed
