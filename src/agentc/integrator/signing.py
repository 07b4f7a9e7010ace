"""The integrator's SSH signing key (git's ``gpg.format = ssh``) and the allowed-signers file.

The key is an ed25519 key made by ``ssh-keygen`` at ``signing_key`` (owner only, 0600, in a
0700 directory the checks never see), its public half beside it (``<key>.pub``). Rotating it
keeps the retired public keys under ``<key dir>/retired/<retired at, ms>.pub``; the
allowed-signers file (``allowed_signers``, default ``<key dir>/allowed_signers``) is always
written from that state: the current key, and each retired key with ``valid-before`` its
retirement time, so commits it signed earlier still verify and nothing it signs later does.
Writing it again is harmless, so ``create`` on an existing key and every ``run`` rewrite it
(which also finishes a rotation a crash interrupted).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentc.core.errors import ConfigError
from agentc.files import UnsafeFile, read_private, write_atomic
from agentc.files.procs import run_check

KEYGEN_TIMEOUT = 60.0
_PRINCIPAL = re.compile(r'^[^\s",]{1,254}$')
_PUBLIC = re.compile(r"^(ssh-ed25519) ([A-Za-z0-9+/=]{20,200})(?: .*)?$")


class SigningError(ConfigError):
    """The signing key cannot be made, read or used (a problem of the host's setup)."""


@dataclass(frozen=True)
class SigningKey:
    key: Path
    allowed_signers: Path
    principal: str  # the committer email the allowed-signers file names

    @property
    def public(self) -> Path:
        return self.key.with_name(self.key.name + ".pub")

    @property
    def retired(self) -> Path:
        return self.key.parent / "retired"

    def check(self) -> None:
        """The private key is there and private (owner only, no other access, no symlink)."""
        try:
            read_private(self.key, max_bytes=64 * 1024)
        except UnsafeFile as exc:
            hint = " (make it with `agentc-integrator signing-key create`)" if exc.missing else ""
            raise SigningError(f"signing_key: {exc.path}: {exc.reason}{hint}") from None


def _keygen(*args: str) -> str:
    """``ssh-keygen`` with ``args``; its standard output, or an error naming what failed."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"}
    try:
        done = run_check(["ssh-keygen", *args], env=env, timeout=KEYGEN_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SigningError(f"cannot run ssh-keygen: {exc}") from None
    if done.returncode != 0:
        raise SigningError(f"ssh-keygen failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _new_key(path: Path, comment: str) -> None:
    """A new ed25519 key pair at ``path`` (ssh-keygen never overwrites one)."""
    _keygen("-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    os.chmod(path, 0o600)


def current_public(sk: SigningKey) -> str:
    """``<type> <base64>`` of the key the integrator signs with, derived from the private key
    itself (never from ``<key>.pub``, which a crash could leave behind)."""
    sk.check()
    return _parse_public(_keygen("-y", "-f", str(sk.key)), sk.key)


def _public_key(path: Path) -> str:
    """``<type> <base64>`` of a public key file, or an error naming it."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise SigningError(f"{path}: cannot read the public key ({exc})") from None
    return _parse_public(text, path)


def _parse_public(text: str, path: Path) -> str:
    found = _PUBLIC.fullmatch(text.strip())
    if found is None:
        raise SigningError(f"{path}: not an ed25519 public key")
    return f"{found[1]} {found[2]}"


def _stamp(ms: int) -> str:
    """ssh-keygen's time (``YYYYMMDDHHMMSS`` and ``Z``: UTC)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y%m%d%H%M%SZ")


def allowed_signers_text(sk: SigningKey) -> str:
    if not _PRINCIPAL.fullmatch(sk.principal):
        raise SigningError(
            f"committer_email: {sk.principal!r} cannot name a signer (no spaces, quotes or commas)"
        )
    current = current_public(sk)
    lines = [f'{sk.principal} namespaces="git" {current}']
    retired = sorted(sk.retired.glob("*.pub")) if sk.retired.is_dir() else []
    for path in retired:
        if not path.stem.isdigit():
            continue
        key = _public_key(path)
        if key != current:  # a rotation interrupted before the new key was in place
            before = _stamp(int(path.stem))
            lines.append(f'{sk.principal} namespaces="git",valid-before="{before}" {key}')
    return "\n".join(lines) + "\n"


def _public_mode() -> int:
    """0644 within the process's umask: public keys, as open as whoever runs us allows."""
    umask = os.umask(0o077)
    os.umask(umask)
    return 0o644 & ~umask


def write_allowed_signers(sk: SigningKey) -> None:
    sk.allowed_signers.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    write_atomic(sk.allowed_signers, allowed_signers_text(sk).encode(), mode=_public_mode())


def create(sk: SigningKey) -> str:
    """Make the key unless it exists; write the allowed-signers file either way."""
    sk.key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(sk.key.parent, 0o700)
    made = not sk.key.exists()
    if made:
        sk.public.unlink(missing_ok=True)
        _new_key(sk.key, sk.principal)
    write_allowed_signers(sk)
    verb = "created" if made else "kept the existing"
    where = f"allowed signers: {sk.allowed_signers}"
    return f"{verb} signing key {sk.key} ({current_public(sk)}); {where}"


def rotate(sk: SigningKey, now_ms: int | None = None) -> str:
    """A new key replaces the current one, whose public half is retired (it verifies what it
    signed until now, nothing later); the retired private key is removed. The switch is one
    rename of the private key: before it the old key signs, after it the new one, and the
    allowed-signers file is written from whichever is in place."""
    old = current_public(sk)
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    fresh = sk.key.with_name(sk.key.name + ".new")
    fresh_public = fresh.with_name(fresh.name + ".pub")
    for leftover in (fresh, fresh_public):
        leftover.unlink(missing_ok=True)
    _new_key(fresh, sk.principal)
    sk.retired.mkdir(mode=0o700, exist_ok=True)
    write_atomic(sk.retired / f"{now}.pub", (old + "\n").encode(), mode=_public_mode())
    os.replace(fresh, sk.key)  # the switch; the old private key is gone with it
    os.replace(fresh_public, sk.public)
    write_allowed_signers(sk)
    return f"rotated signing key {sk.key}: now {current_public(sk)}, retired {old}"
