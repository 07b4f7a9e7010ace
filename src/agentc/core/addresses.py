"""Address rules every program shares (pure: no I/O, no name resolution)."""

from __future__ import annotations

import ipaddress
import secrets
from urllib.parse import urlsplit

LOCAL_CONSOLE_PREFIX = "agentc-"


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` (any case) and any loopback IP literal (IPv6 may be bracketed)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_localhost_name(host: str) -> bool:
    """True for a name under ``.localhost`` (``agentc-1f….localhost``): RFC 6761 reserves them
    for loopback, browsers resolve them to loopback themselves, and no other server is reached
    under them, so a cookie set for one is sent to nothing else on the host but servers visited
    under that very name."""
    labels = host.lower().rstrip(".").split(".")
    return len(labels) >= 2 and labels[-1] == "localhost" and all(labels[:-1])


def new_local_console_origin(port: int) -> str:
    """A console origin of its own on this machine: ``http://agentc-<32 hex>.localhost:PORT``.
    The random label is the secret part (128 bits): whoever does not know it cannot send a
    browser there."""
    return f"http://{LOCAL_CONSOLE_PREFIX}{secrets.token_hex(16)}.localhost:{port}"


def origin_port(origin: str) -> int | None:
    """The port an http(s) origin names (its scheme's default when it names none); None for
    anything that is not an http(s) origin."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return port or (443 if parts.scheme == "https" else 80)


def local_console_origin(previous: object, port: int) -> str:
    """The console's origin on this machine for ``port``: ``previous`` (kept from an earlier
    start) while it is a name of the console's own on that very port, else a new one. A new
    port gets a new name: a browser still visiting the old name goes to the old port, which
    anyone may take now, so the old name (and what a browser sends under it) must open
    nothing any more."""
    if isinstance(previous, str) and origin_port(previous) == port:
        host = urlsplit(previous).hostname or ""
        if previous.startswith("http://") and is_localhost_name(host):
            return previous
    return new_local_console_origin(port)
