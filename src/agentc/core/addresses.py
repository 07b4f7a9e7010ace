"""Address rules every program shares (pure: no I/O, no name resolution)."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` (any case) and any loopback IP literal (IPv6 may be bracketed)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
