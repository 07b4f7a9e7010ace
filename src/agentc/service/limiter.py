"""The sign-in throttle, and the device cookies that keep people in (the flows that use it are
`agentc.service.signin`).

Guessing is limited per account whatever the source: every failed sign-in (and every failed
current-password check of a password change) is a row in the database (`agentc.store.throttle`)
that every service process reads. A failure falls in one of two lanes of its account:

- **the device's lane**, when the request carries a device cookie the service signed for that
  very account: a browser that signed in to it successfully before (the console's sign-in form
  sets one, 365 days, named and scoped like the session cookie). Only that device's own
  failures slow it, so a person whose browser holds one gets in with the right password
  however much anyone else guesses;
- **the account's lane** for every other client, whatever its address: five failures free,
  then a wait after the latest that doubles from 2 s up to 15 minutes. The wait always ends,
  but whoever guesses shares this lane with a browser that never signed in.

Every failure of the account's lane also counts for its source (30 a minute, any names), where
all of 127.0.0.0/8 and ::1 are one source (any local program can use any of them), an IPv6
client is its /64, and behind a configured TLS proxy the forwarded address is the source.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from agentc.core.addresses import is_loopback_host
from agentc.core.errors import CoordinatorError
from agentc.core.rules import fold_name
from agentc.store import throttle

DEVICE_COOKIE_MS = 365 * 24 * 3600 * 1000
_DEVICE_MAC = "agentc-sign-in-device-v1"
LOOPBACK_SOURCE = "loopback"


@dataclass(frozen=True)
class Client:
    """Who is signing in, as the throttle sees them: the source (`source_of`) and the device
    cookie the request carried (unchecked)."""

    source: str
    device_cookie: str | None = None


def source_of(address: str) -> str:
    """The source a client address counts as: every loopback address is one source, an IPv6
    address is its /64, anything else itself (cut to the 64 characters the record keeps)."""
    if is_loopback_host(address):
        return LOOPBACK_SOURCE
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        if mapped is not None:
            return LOOPBACK_SOURCE if mapped.is_loopback else str(mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def _mac(key: str, principal_id: str, nonce: str, issued: int) -> str:
    message = f"{_DEVICE_MAC}|{principal_id}|{nonce}|{issued}".encode()
    return hmac.new(bytes.fromhex(key), message, hashlib.sha256).hexdigest()


def mint_device(key: str, principal_id: str, now: int) -> str:
    """A device cookie's value for the account: ``<nonce>.<issued ms>.<HMAC>``."""
    nonce = secrets.token_hex(16)
    return f"{nonce}.{now}.{_mac(key, principal_id, nonce, now)}"


def device_of(conn: Connection, cookie: str | None, principal_id: str, now: int) -> str | None:
    """The device (its nonce) when cookie is a device cookie the service signed for this
    account and it has not expired; None for anything else."""
    parts = cookie.split(".") if cookie else []
    if len(parts) != 3 or len(parts[0]) != 32 or not parts[1].isdigit():
        return None
    nonce, issued, mac = parts
    if not 0 <= now - int(issued) < DEVICE_COOKIE_MS:
        return None
    key = throttle.device_key(conn)
    if key is None or not hmac.compare_digest(mac, _mac(key, principal_id, nonce, int(issued))):
        return None
    return nonce


class LoginLimiter:
    """The throttle's rule (see the module's docstring); times are the service clock's (ms)."""

    def __init__(
        self,
        per_source: int = 30,
        free: int = 5,
        source_window_s: float = 60.0,
        memory_s: float = 24 * 3600.0,
        max_wait_s: float = 900.0,
    ) -> None:
        self.per_source, self.free = per_source, free
        self.source_window_ms, self.memory_ms = int(source_window_s * 1000), int(memory_s * 1000)
        self.max_wait_ms = int(max_wait_s * 1000)

    def _wait_ms(self, lane: throttle.Lane, now: int) -> int:
        """How much longer the lane must wait (0: it may try now)."""
        if lane.failures < self.free or lane.last is None:
            return 0
        wait = min(self.max_wait_ms, 1000 << (lane.failures - self.free + 1))
        return max(0, lane.last + wait - now)

    def check(
        self, conn: Connection, name_key: str, client: Client, device: str | None, now: int
    ) -> None:
        """Refuse (429) when the lane this attempt is in must wait."""
        since = now - self.memory_ms
        if device is not None:
            wait = self._wait_ms(throttle.device_failures(conn, device, since), now)
            if wait:
                raise _throttled("from this browser", wait)
            return
        busy = throttle.source_failures(conn, client.source, now - self.source_window_ms)
        if busy >= self.per_source:
            raise _throttled("from this address", self.source_window_ms)
        wait = self._wait_ms(throttle.account_failures(conn, name_key, since), now)
        if wait:
            raise _throttled(
                "for this account; a browser that signed in to it before is not held back",
                wait,
            )

    def failed(
        self, conn: Connection, name_key: str, client: Client, device: str | None, now: int
    ) -> None:
        throttle.record_failure(conn, client.source, name_key, device, now)
        throttle.forget_before(conn, now - max(self.memory_ms, self.source_window_ms))

    def succeeded(self, conn: Connection, device: str | None) -> None:
        """A success clears its device's lane (the account's lane only ages: its failures are
        whoever guessed, not the person who got in)."""
        if device is not None:
            throttle.forget_device(conn, device)


def _throttled(why: str, wait_ms: int) -> CoordinatorError:
    seconds = -(-wait_ms // 1000)
    return CoordinatorError(
        "rate_limited",
        f"too many failed sign-ins {why}; wait {seconds} s and retry",
        status=429,
        retryable=True,
        details={"retry_after_seconds": seconds},
    )


def name_key_of(username: str) -> str:
    """The name as the throttle keys it (cut to the width the failures table keeps)."""
    return fold_name(username)[:100]
