"""The real role credentials: read from protected host files, injected into forwarded calls.

A credential file is a regular file (not a symlink) owned by the gateway's user with no group
or other permission bits (0600 or 0400), at most 64 KiB, read with
:func:`agentc.files.read_private`. Its content is either one line holding an API key, or
JSON ``{"api_key": "..."}`` / ``{"oauth_token": "..."}``. Errors name the file and what is
wrong with it, never any of its bytes. Files are re-read when they change (rotation).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentc.files import UnsafeFile, read_private
from agentc.gateway.errors import CredentialError

MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Credential:
    kind: Literal["api_key", "oauth"]
    secret: str

    def __repr__(self) -> str:  # never print the secret by accident
        return f"Credential(kind={self.kind!r}, secret=<hidden>)"

    def headers(self, api: str) -> dict[str, str]:
        """The auth headers the upstream API expects for this credential."""
        if api == "anthropic" and self.kind == "api_key":
            return {"x-api-key": self.secret}
        return {"authorization": f"Bearer {self.secret}"}


def read_credential(path: Path) -> Credential:
    try:
        raw = read_private(path, max_bytes=MAX_BYTES, single_link=False)
    except UnsafeFile as exc:
        if exc.missing:
            raise CredentialError(f"{path}: credential file does not exist") from None
        raise CredentialError(f"{path}: credential file: {exc.reason}") from None
    return _parse(path, raw)


def _parse(path: Path, raw: bytes) -> Credential:
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialError(f"{path}: credential file is not UTF-8 text") from None
    if not text:
        raise CredentialError(f"{path}: credential file is empty")
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            # The decoder's message may quote the content: say only where.
            raise CredentialError(f"{path}: credential file is not valid JSON") from None
        if not isinstance(data, dict):
            raise CredentialError(f"{path}: credential JSON must be an object")
        keys = set(data) & {"api_key", "oauth_token"}
        if len(keys) != 1 or not isinstance(data[next(iter(keys))], str):
            raise CredentialError(
                f"{path}: credential JSON needs exactly one of api_key or oauth_token (a string)"
            )
        key = next(iter(keys))
        secret = data[key].strip()
        kind: Literal["api_key", "oauth"] = "api_key" if key == "api_key" else "oauth"
    else:
        if "\n" in text:
            raise CredentialError(f"{path}: a plain credential file must hold one line")
        secret, kind = text, "api_key"
    if not secret or any(c.isspace() for c in secret):
        raise CredentialError(f"{path}: the credential is empty or contains whitespace")
    return Credential(kind, secret)


class CredentialStore:
    """Caches each file's credential; re-reads it when the file's identity or mtime changes."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[int, int, int], Credential]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> Credential:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return read_credential(path)  # raises with the reason
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            hit = self._cache.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        cred = read_credential(path)
        with self._lock:
            self._cache[path] = (key, cred)
        return cred
