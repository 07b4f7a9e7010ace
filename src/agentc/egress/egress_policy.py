"""The egress proxy's pure rules: which addresses are public, which names are allowed, and
how a launch's relay names its launch on each connection.

Used by :mod:`agentc.egress.egress`, which re-exports them, and by the relay's host
half (the launch line); nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, IPv6Network, ip_network

from agentc.core.errors import SupervisorError

IPAddress = IPv4Address | IPv6Address


class EgressConfigError(SupervisorError):
    """An egress proxy setting (socket, account, allowlist entry) is invalid."""


# ---------------------------------------------------------------------------------------------
# The launch line (pure): the first bytes of every connection a launch's relay makes

LAUNCH_LINE_PREFIX = b"agentc-launch "
MAX_LAUNCH_LINE = 64
_LAUNCH_ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def launch_line(launch_id: str) -> bytes:
    """``agentc-launch <launch id>\\n``: how the relay's host half names its launch to the
    proxy before any byte of the launch's (ValueError for anything but a canonical UUID)."""
    line = LAUNCH_LINE_PREFIX + launch_id.encode("ascii", "replace") + b"\n"
    if parse_launch_line(line) is None:
        raise ValueError(f"a launch id is a canonical UUID, not {launch_id!r}")
    return line


def parse_launch_line(line: bytes) -> str | None:
    """The launch id of a launch line (with its newline), or None when it is not one."""
    if not line.startswith(LAUNCH_LINE_PREFIX) or not line.endswith(b"\n"):
        return None
    found = line[len(LAUNCH_LINE_PREFIX) : -1]
    return found.decode() if _LAUNCH_ID.fullmatch(found) else None


# ---------------------------------------------------------------------------------------------
# Address policy (pure)

# Special ranges, checked in order (an address is only ever inside a network of its own
# version). The IPv6 forms that embed an IPv4 address are judged by it, before this table.
_REFUSED = tuple(
    (ip_network(net), why)
    for net, why in (
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "cgnat"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # includes 255.255.255.255 (broadcast)
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "ipv4-compatible"),
        ("64:ff9b:1::/48", "nat64-local"),
        ("100::/64", "discard"),
        ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo 2001::/32 included
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)
_V6_GLOBAL_UNICAST = IPv6Network("2000::/3")
_V6_NAT64 = IPv6Network("64:ff9b::/96")
_V6_6TO4 = IPv6Network("2002::/16")


def _special(ip: IPAddress) -> str | None:
    for net, why in _REFUSED:
        if ip in net:
            return why
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """Why `ip` is not a public address the proxy may connect to, or None if it is."""
    if isinstance(ip, IPv4Address):
        return _special(ip)
    if ip.scope_id:
        return "scoped"
    if ip.ipv4_mapped is not None:
        inner = _special(ip.ipv4_mapped)
        return None if inner is None else f"ipv4-mapped {inner}"
    if ip in _V6_NAT64 or ip in _V6_6TO4:
        # NAT64 keeps the IPv4 address in the low 32 bits, 6to4 in bits 16-47.
        raw = int(ip) & 0xFFFFFFFF if ip in _V6_NAT64 else (int(ip) >> 80) & 0xFFFFFFFF
        inner = _special(IPv4Address(raw))
        kind = "nat64" if ip in _V6_NAT64 else "6to4"
        return None if inner is None else f"{kind} {inner}"
    return _special(ip) or (None if ip in _V6_GLOBAL_UNICAST else "reserved")


def is_public_address(ip: IPAddress) -> bool:
    return address_refusal(ip) is None


# ---------------------------------------------------------------------------------------------
# Host names and the allowlist (pure)

_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")


def normalize_host(host: str) -> str | None:
    """A lower-case DNS name without a trailing dot, or None if `host` is not one.

    Only `[A-Za-z0-9.-]` names: no IP literals of any form (their last label would be numeric),
    no userinfo, no percent-encoding, no IDN in Unicode form.
    """
    name = host.lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > 253 or not name.isascii():
        return None
    labels = name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return None
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return None
    return name


def parse_allow_entry(entry: str) -> str:
    """Check one allowlist entry: `name` (exactly that host) or `.name` (its subdomains)."""
    suffix = entry.startswith(".")
    name = normalize_host(entry[1:] if suffix else entry)
    if name is None or entry.endswith(".") or entry != entry.strip():
        raise EgressConfigError(f"egress allowlist entry {entry!r} is not a host name or .suffix")
    return f".{name}" if suffix else name


@dataclass(frozen=True)
class Allowlist:
    exact: frozenset[str]
    suffixes: tuple[str, ...]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Allowlist:
        checked = [parse_allow_entry(e) for e in entries]
        return cls(
            frozenset(e for e in checked if not e.startswith(".")),
            tuple(sorted({e for e in checked if e.startswith(".")})),
        )

    def allows(self, host: str) -> bool:
        """`host` must already be normalized. `.suffix` matches subdomains, not the apex."""
        return host in self.exact or any(host.endswith(s) for s in self.suffixes)
