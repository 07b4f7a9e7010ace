"""Host mode's test kit: throwaway role accounts, the seed's protected layout under a short
root-owned base, a loop in host mode whose agent records who it runs as and what it can read,
and a git daemon the push account publishes to (used by the host-mode loop tests)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.kit import admin_project, issue_token, make_clone, write_credentials
from tests.kit.live import LiveServer
from tests.supervisor.kit import (
    PORTABLE_PYTHON,
    REPO,
    Account,
    Kit,
    mkdir_owned,
    throwaway_accounts,
)
from tests.supervisor.loop.kit import LoopKit, agent_run

SHIM = REPO / "src/agentc/client/bin/agent-coordinator"

# Records who it runs as and which of ``PROBES`` it can read (and what it sees of the role's
# runs), commits that with a greeting, and submits.
HOST_AGENT = """#!/bin/sh
set -e
cat > "$TMPDIR/prompt.md"
echo '{{"type": "agent", "step": "start"}}'
cd agentc-checkout
id -u > uid.txt
stat -c %u . > owner.txt
stat -c '%a %g' "$(dirname "$AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET")" > push.txt
for f in {probes}; do
    if cat "$f" > /dev/null 2>&1; then echo "read $f"; else echo "denied $f"; fi
done > probes.txt
ls -A {runs} > runs.txt 2>&1 || true
echo hi > greeting.txt
git add uid.txt owner.txt push.txt probes.txt runs.txt greeting.txt
git commit --quiet -m greeting
cat > "$TMPDIR/submission.json" <<'JSON'
{{"summary": "greeting added",
 "acceptance_evidence": [{{"criterion": "greeting exists", "evidence": "greeting.txt"}}]}}
JSON
agent-coordinator submissions code --checkout "$PWD" --input "$TMPDIR/submission.json" \\
    --json > "$TMPDIR/submitted.json"
echo '{{"type": "agent", "step": "submitted"}}'
"""


@pytest.fixture(scope="module")
def accounts() -> Iterator[dict[str, Account]]:
    # The roles, the push helper's account, and another local user (none of them).
    with throwaway_accounts(
        {"implementer": "agentc-li-", "reviewer": "agentc-lr-", "push": "agentc-lp-",
         "other": "agentc-lo-"}
    ) as found:  # fmt: skip
        yield found


def _file(path: Path, data: str, uid: int, gid: int, mode: int) -> Path:
    path.write_text(data)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return path


@dataclass
class HostLoop:
    loop: LoopKit
    root: Path
    accounts: dict[str, Account]
    credential: Path  # the loop's implementer credential (root 0600, outside the role dirs)
    reviewer_credential: Path
    other_run: Path  # another implementer launch's run, left behind with a secret
    reviewer_run: Path  # a reviewer launch's run, with a secret
    push_key: Path  # [push_helper] ssh_key: the push account's, 0400

    def as_role(self, role: str, *argv: str) -> subprocess.CompletedProcess[str]:
        who = self.accounts[role]
        prefix = ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", "--clear-groups"]
        return subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, timeout=60, cwd="/", env={}
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _git_daemon(base: Path) -> Iterator[str]:
    """Serve ``base``'s repositories (root's) on loopback, pushes allowed: the push account
    publishes there as a remote, as it would to GitHub (git refuses a local repository another
    account owns, so neither root nor the push account could share a path remote)."""
    port = _free_port()
    env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
         f"--base-path={base}", "--export-all", "--enable=receive-pack",
         "--informative-errors", str(base)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"git://127.0.0.1:{port}/origin.git"
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["git", "ls-remote", url], env=env, capture_output=True).returncode:
            assert daemon.poll() is None and time.monotonic() < deadline, "git daemon"
            time.sleep(0.1)
        yield url
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


@pytest.fixture
def host(
    accounts: dict[str, Account], server: LiveServer, admin: httpx.Client
) -> Iterator[HostLoop]:
    """The seed's protected layout under a short root-owned 0755 base the roles can reach."""
    root = Path(tempfile.mkdtemp(prefix="lh", dir="/tmp"))
    try:
        os.chmod(root, 0o755)  # noqa: S103 - root-owned, so the role accounts can traverse
        state = mkdir_owned(mkdir_owned(root / "kit", 0, 0, 0o755) / "state", 0, 0, 0o755)
        for role in ("implementer", "reviewer"):
            account = accounts[role]
            role_dir = mkdir_owned(state / ("impl" if role == "implementer" else "rev"), 0,
                              account.gid, 0o750)  # fmt: skip
            for sub in ("runs", "clones", "home"):
                mkdir_owned(role_dir / sub, account.uid, account.gid, 0o700)
        impl, rev = accounts["implementer"], accounts["reviewer"]
        other_run = mkdir_owned(state / "impl/runs/other-launch", impl.uid, impl.gid, 0o700)
        _file(other_run / "secret", "other launch\n", impl.uid, impl.gid, 0o600)
        reviewer_run = mkdir_owned(state / "rev/runs/some-review", rev.uid, rev.gid, 0o700)
        _file(reviewer_run / "secret", "reviewer\n", rev.uid, rev.gid, 0o600)
        bin_dir = mkdir_owned(root / "bin", 0, 0, 0o755)
        shutil.copyfile(SHIM, bin_dir / "agent-coordinator")
        os.chmod(bin_dir / "agent-coordinator", 0o755)  # noqa: S103 - the launch runs it
        project = admin_project(admin)
        token = issue_token(admin, f"impl-{uuid.uuid4().hex[:6]}", project, "supervised")
        mkdir_owned(root / "etc", 0, 0, 0o755)
        credential = write_credentials(root / "etc/impl", server.url, token)
        reviewer_credential = write_credentials(root / "etc/rev", server.url, "not-a-token")
        origin, clone = make_clone(root / "repo")
        push = accounts["push"]
        push_key = _file(root / "etc/push-key", "not a real key\n", push.uid, push.gid, 0o400)
        agent_dir = mkdir_owned(root / "agent", 0, 0, 0o755)
        probes = [
            credential,
            reviewer_credential,
            state / "loop/client/credentials.toml",
            other_run / "secret",
            reviewer_run / "secret",
        ]
        text = HOST_AGENT.format(probes=" ".join(map(str, probes)), runs=state / "impl/runs")
        agent = _file(agent_dir / "agent.sh", text, 0, 0, 0o755)
        top: dict[str, Any] = {
            "mode": "host",
            "bin_dir": str(bin_dir),
            "expose": [str(bin_dir)],  # /opt/agentc/bin on a host; here under the masked /tmp
            "implementer_user": impl.name,
            "reviewer_user": rev.name,
            "supervisor_program": [
                "/usr/bin/env",
                f"PYTHONPATH={REPO / '.venv/lib/python3.11/site-packages'}:{REPO / 'src'}",
                "/usr/bin/python3",
                "-m",
                "agentc.supervisor.cli",
            ],
            "push_helper": {
                "user": push.name,
                "program": [*PORTABLE_PYTHON, "-m", "agentc.push.cli"],
                "ssh_key": str(push_key),  # unused by a git:// remote; its owner is checked
            },
        }
        run = agent_run(agent)
        kit = Kit(root, state, bin_dir, root / "supervisor.toml", "host")
        loop = LoopKit(kit, server, admin, project, origin, agent, root / "supervisor.toml", run,
                       top=top, clone=clone, binding={"credential_file": str(credential)},
                       portable=True)  # fmt: skip
        with _git_daemon(root / "repo") as url:
            loop.repository_url = url
            loop.write_config()
            yield HostLoop(loop, root, accounts, credential, reviewer_credential, other_run,
                           reviewer_run, push_key)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the push base is inside: the path is short
