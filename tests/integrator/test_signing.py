"""The integrator signs what it lands with its own SSH key (``gpg.format = ssh``): with the
allowed-signers file it writes, ``git verify-commit`` and ``git log --show-signature`` verify
every landed commit and nothing an agent signed; the key is private, hidden from the checks,
and rotatable (the retired key verifies only what it signed before)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.client.kit import git
from tests.integrator.kit import PASS, Setup, make_setup
from tests.kit.live import LiveServer

EMAIL = "integrator@agentc.invalid"


def keyed(
    s: Setup, checks: dict[str, list[str]] = PASS, key: Path | None = None, **extra: object
) -> Path:
    """The setup configured with a signing key, made by the command."""
    key = key or s.root / "signing" / "key"
    s.write_config(checks, signing_key=key, **extra)
    made = s.integrator("signing-key", "create")
    assert made.returncode == 0, made.stderr
    assert "created signing key" in made.stdout
    return key


def verify(repo: Path, allowed: Path, revision: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", f"gpg.ssh.allowedSignersFile={allowed}",
         "verify-commit", revision],
        capture_output=True, text=True, check=False,
        env={"PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip


def signed_by(signer: Path, repo: Path, email: str = EMAIL, later: int = 0) -> str:
    """A commit on the target's tip signed with ``signer`` (an agent's own key), naming the
    integrator as its author and committer, dated ``later`` seconds from now."""
    tree = git(repo, "rev-parse", "main^{tree}")
    ident = {"GIT_COMMITTER_NAME": "agentc-integrator", "GIT_COMMITTER_EMAIL": email}
    ident["GIT_COMMITTER_DATE"] = f"@{int(time.time()) + later} +0000"
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "gpg.format=ssh", "-c", f"user.signingkey={signer}",
         "commit-tree", "-S", "-p", "main", "-m", "looks landed", tree],
        capture_output=True, text=True, check=True,
        env={"PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
             "GIT_AUTHOR_NAME": "agentc-integrator", "GIT_AUTHOR_EMAIL": email, **ident},
    )  # fmt: skip
    return done.stdout.strip()


def agent_key(root: Path) -> Path:
    path = root / "agent-key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", EMAIL, "-f", str(path)],
        check=True,
    )
    return path


def test_landed_commits_verify_and_an_agents_signature_does_not(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    key = keyed(s, merge_policy="merge")
    allowed = key.parent / "allowed_signers"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert allowed.read_text().startswith(f'{EMAIL} namespaces="git" ssh-ed25519 ')

    s.approved({"one.txt": "1\n"})
    s.push_to_target({"elsewhere.txt": "x\n"})
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    tip = s.tip()
    for revision in (tip, f"{tip}^2"):  # the merge and the reviewed change it brings
        ok = verify(s.origin, allowed, revision)
        assert ok.returncode == 0, ok.stderr
        assert f'Good "git" signature for {EMAIL}' in ok.stderr
    shown = git(s.origin, "-c", f"gpg.ssh.allowedSignersFile={allowed}", "log",
                "--show-signature", "-1", tip)  # fmt: skip
    assert f'Good "git" signature for {EMAIL}' in shown

    # Not signed by the integrator's key, not verified: an agent's own key naming the
    # integrator, and the target's own unsigned commit.
    forged = signed_by(agent_key(tmp_path), s.origin)
    refused = verify(s.origin, allowed, forged)
    assert refused.returncode != 0 and "No principal matched" in refused.stderr
    assert verify(s.origin, allowed, f"{tip}^1").returncode != 0
    # `create` again keeps the key.
    public = (key.parent / "key.pub").read_text()
    again = s.integrator("signing-key", "create")
    assert again.returncode == 0 and "kept the existing signing key" in again.stdout
    assert (key.parent / "key.pub").read_text() == public


def test_a_rotated_key_verifies_only_what_it_signed_before(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    key = keyed(s)
    allowed = key.parent / "allowed_signers"
    s.approved({"one.txt": "1\n"})
    assert s.integrator("run", "--once").returncode == 0
    first = s.tip()
    leaked = shutil.copy(key, tmp_path / "leaked-key")  # a copy of the key, taken before

    rotated = s.integrator("signing-key", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    git(s.clone, "pull", "--quiet", "--ff-only", "origin", "main")  # workers build on it
    s.approved({"two.txt": "2\n"})
    assert s.integrator("run", "--once").returncode == 0
    second = s.tip()
    assert second != first
    for revision in (first, second):
        assert verify(s.origin, allowed, revision).returncode == 0, revision
    assert len(allowed.read_text().splitlines()) == 2
    # What the retired key signs dated after its retirement is refused (the date is the
    # commit's own: docs/integrator.md says what that does not cover).
    late = verify(s.origin, allowed, signed_by(Path(leaked), s.origin, later=2))
    assert late.returncode != 0 and "expired" in late.stderr


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside every tree the checks hide anyway (/tmp, homes, /var/lib/agentc)."""
    path = Path("/var/lib") / f"agentc-test-{uuid.uuid4().hex[:8]}"
    path.mkdir(mode=0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_the_key_is_required_private_and_hidden_from_the_checks(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, outside: Path
):
    s = make_setup(tmp_path, server.url, admin)
    key = outside / "signing" / "key"
    s.write_config(PASS, signing_key=key)
    missing = s.integrator("run", "--once")
    assert missing.returncode == 2
    assert "signing_key" in missing.stderr and "signing-key create" in missing.stderr

    # A check that sees anything of the key's directory (masked: an empty one) fails.
    folder = key.parent
    probe = ["/bin/sh", "-c", f'test -f README && test -d {folder} && test -z "$(ls -A {folder})"']
    keyed(s, {"probe": probe}, key=key)
    assert sorted(p.name for p in folder.iterdir()) == ["allowed_signers", "key", "key.pub"]
    key.chmod(0o644)
    loose = s.integrator("run", "--once")
    assert loose.returncode == 2 and "no group or other access" in loose.stderr
    key.chmod(0o600)
    sub = s.approved({"one.txt": "1\n"})
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert s.task(sub["task"]["id"])["work_status"] == "done", s.reports()


def test_signing_key_needs_the_setting(server: LiveServer, admin: httpx.Client, tmp_path: Path):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    for verb in ("create", "rotate"):
        out = s.integrator("signing-key", verb)
        assert out.returncode == 2 and "signing_key: not configured" in out.stderr
