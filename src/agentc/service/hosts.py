"""Which name a request came under (its ``Host``), and what may be done under it.

A browser sends a cookie to every server of the host name it was set for, whatever the port,
so a session is only as private as the name the console is served under. The console's own
name is its public origin's host (``agentc-<random>.localhost`` under ``agentc up``, the TLS
proxy's name in a deployment): browser sessions exist only under it. API clients reach the
service on loopback (``127.0.0.1``, ``::1``, ``localhost``) with bearer tokens. Any other name is
refused: a page whose name was rebound to 127.0.0.1 (DNS rebinding) reads nothing from the
service.
"""

from __future__ import annotations

import enum
import re
from urllib.parse import urlsplit

from agentc.core.addresses import is_loopback_host


class Under(enum.Enum):
    CONSOLE = "console"  # the public origin's own host
    LOOPBACK = "loopback"  # a loopback address or `localhost` (API clients), or no Host at all
    FOREIGN = "foreign"  # any other name: refused


_CACHE_MAX = 256
_HOST = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:[0-9]{1,5})?$")


class Hosts:
    """The Host header values of one service: its public origin's, then loopback ones."""

    def __init__(self, public_origin: str) -> None:
        parts = urlsplit(public_origin)
        host, port = (parts.hostname or "").lower(), parts.port
        default = 443 if parts.scheme == "https" else 80
        bracketed = f"[{host}]" if ":" in host else host
        names = {f"{bracketed}:{port or default}"}
        if port is None or port == default:
            names.add(bracketed)  # browsers leave a scheme's default port out of Host
        self.console = frozenset(names)
        self._seen: dict[bytes, Under] = {}

    def under(self, host: bytes | None) -> Under:
        """Which name a request's Host header (raw bytes; None: none was sent) is."""
        if host is None:
            return Under.LOOPBACK
        found = self._seen.get(host)
        if found is None:
            found = self._classify(host.decode("latin-1").strip().lower())
            if len(self._seen) >= _CACHE_MAX:
                self._seen.clear()  # Host values are few; a client sending many gains nothing
            self._seen[host] = found
        return found

    def _classify(self, value: str) -> Under:
        if value in self.console:
            return Under.CONSOLE
        found = _HOST.match(value)
        return Under.LOOPBACK if found and is_loopback_host(found.group(1)) else Under.FOREIGN
