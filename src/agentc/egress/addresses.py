"""The relay's address rules, written once (pure: no I/O, no click, no asyncio).

`supervisor.toml` (`egress_listen`, `coordinator_listen`, `gateway_listen`, `gateway_address`),
the relay's two halves and the egress proxy all parse addresses here, so a setting that loads
is one the relay can carry, and the launch's import of these rules costs nothing.

Relay addresses must be carried faithfully, so anything ambiguous is refused rather than
guessed: userinfo, IPv6, shorthand or non-decimal IPv4 (`127.1`, `2130706433`, `0x7f.0.0.1`),
leading zeros (`127.000.0.1`, port `03128`), the network and broadcast addresses of 127.0.0.0/8,
and ports below 1024 (the namespace half binds unprivileged). A host service may also be a Unix
socket, written `unix:/abs/path`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

from agentc.core.addresses import is_loopback_host
from agentc.core.errors import SupervisorError
from agentc.files.sockets import MAX_SOCKET_PATH_BYTES, name_fits

MIN_RELAY_PORT = 1024
UNIX_PREFIX = "unix:"

_DECIMAL_OCTET = re.compile(r"0|[1-9][0-9]{0,2}")
_DECIMAL_PORT = re.compile(r"[1-9][0-9]{0,4}")
# WHATWG URL parsing treats a host whose last label is numeric as IPv4 (in any base): such a
# host must be a canonical dotted quad, or clients would disagree about what it names.
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_HOST_CHARS = re.compile(r"[a-z0-9._-]+")
_ENDPOINT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
# 127.0.0.0/8 is loopback, but its network and broadcast addresses are not usable hosts.
_LOOPBACK_EDGES = (IPv4Address("127.0.0.0"), IPv4Address("127.255.255.255"))
_ZERO_NET = IPv4Network("0.0.0.0/8")


class RelayAddressError(SupervisorError, ValueError):
    """A relay address or relay URL the relay cannot carry faithfully.

    Also a ValueError: a bad setting value, so a settings check reports it under its key.
    """


@dataclass(frozen=True, order=True)
class LoopbackAddress:
    """An IPv4 loopback address in canonical dotted-quad form with an unprivileged port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, order=True)
class UnixTarget:
    """A host service's Unix socket: an absolute, normalized path (checked again on connect)."""

    path: Path

    def __str__(self) -> str:
        return f"{UNIX_PREFIX}{self.path}"


HostTarget = LoopbackAddress | UnixTarget


@dataclass(frozen=True)
class RelaySpec:
    """One namespace-half relay: listen on `listen`, forward to the Unix socket `socket`."""

    listen: LoopbackAddress
    socket: Path

    def __str__(self) -> str:
        return f"{self.listen}={self.socket}"


@dataclass(frozen=True)
class RelayEndpoint:
    """One relayed service: its socket name, the in-namespace address and the host target.

    ``launch``: the launch id the host half names on every connection before any byte of the
    launch's (the egress proxy's identification line, ``egress_policy.launch_line``)."""

    name: str
    listen: LoopbackAddress
    target: HostTarget
    launch: str | None = None


def _canonical_ipv4(text: str) -> IPv4Address | None:
    """The address if `text` is exactly four decimal octets without leading zeros."""
    parts = text.split(".")
    if len(parts) != 4 or not all(_DECIMAL_OCTET.fullmatch(p) for p in parts):
        return None
    if any(int(p) > 255 for p in parts):
        return None
    return IPv4Address(text)


def _parse_port(text: str, what: str) -> int:
    if not _DECIMAL_PORT.fullmatch(text) or int(text) > 65535:
        raise RelayAddressError(f"{what}: port {text!r} is not a decimal port 1-65535")
    port = int(text)
    if port < MIN_RELAY_PORT:
        raise RelayAddressError(
            f"{what}: port {port} is privileged; relayed ports must be >= {MIN_RELAY_PORT}"
        )
    return port


def _loopback_ip(text: str, what: str) -> str:
    ip = _canonical_ipv4(text)
    if ip is None:
        raise RelayAddressError(
            f"{what}: {text!r} is not an IPv4 address in canonical dotted-quad form"
        )
    if not is_loopback_host(str(ip)) or ip in _LOOPBACK_EDGES:
        raise RelayAddressError(
            f"{what}: {text} is not a loopback address (IPv4 127.0.0.1-127.255.255.254)"
        )
    return str(ip)


def parse_loopback_address(text: str, *, what: str = "relay address") -> LoopbackAddress:
    """Parse `a.b.c.d:port`: canonical IPv4 loopback and a port >= 1024, nothing else."""
    if "@" in text:
        raise RelayAddressError(f"{what}: {text!r} has userinfo")
    if text.startswith(UNIX_PREFIX):
        raise RelayAddressError(
            f"{what}: {text!r} is a Unix socket; an IPv4 loopback address is needed here"
        )
    if text.startswith("[") or text.count(":") > 1:
        raise RelayAddressError(f"{what}: {text!r} is IPv6; only IPv4 loopback can be relayed")
    host, sep, port = text.partition(":")
    if not sep:
        raise RelayAddressError(f"{what}: {text!r} has no port (expected 127.0.0.1:PORT)")
    return LoopbackAddress(_loopback_ip(host, what), _parse_port(port, what))


def parse_relay_spec(text: str) -> RelaySpec:
    """Parse a namespace relay `127.0.0.1:PORT=/abs/path.sock`."""
    address, sep, path = text.partition("=")
    if not sep:
        raise RelayAddressError(f"relay {text!r}: expected 127.0.0.1:PORT=/path/to/socket")
    listen = parse_loopback_address(address, what=f"relay {text!r}")
    check_socket_path(path, what=f"relay {text!r}", via_directory=True)
    return RelaySpec(listen, Path(path))


def check_socket_path(path: str, *, what: str = "socket path", via_directory: bool = False) -> None:
    """A Unix socket path must be absolute, NUL-free and fit in sun_path; with
    ``via_directory`` a longer one is allowed when its name fits after the
    ``/proc/self/fd/<fd>/`` prefix (it is then reached through its directory's descriptor,
    :mod:`agentc.files.sockets`)."""
    if not path.startswith("/"):
        raise RelayAddressError(f"{what}: socket path {path!r} is not absolute")
    if "\0" in path:
        raise RelayAddressError(f"{what}: socket path contains NUL")
    fits = len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES
    if not fits and not (via_directory and name_fits(path)):
        raise RelayAddressError(
            f"{what}: socket path is longer than {MAX_SOCKET_PATH_BYTES} bytes: {path}"
        )


def parse_host_target(target: str | Path, *, what: str = "relay target") -> HostTarget:
    """A host half's target: `127.0.0.1:PORT`, or a Unix socket as `unix:/abs/path` or a Path.

    A socket path must be absolute and normalized (no `.`, `..`, `//` or trailing `/`): it is
    carried as written. Whether it is a socket, and that no component is a symlink, is checked
    each time the relay connects (the service may start after the launch). The relay connects
    through an ``O_PATH`` descriptor of the socket, so a long path is fine when its name fits
    (``check_socket_path``'s ``via_directory``).
    """
    if isinstance(target, Path):
        text = str(target)
    elif target.startswith(UNIX_PREFIX):
        text = target.removeprefix(UNIX_PREFIX)
    elif target.startswith("/"):
        raise RelayAddressError(f"{what}: write a Unix socket target as {UNIX_PREFIX}{target}")
    else:
        return parse_loopback_address(target, what=what)
    check_socket_path(text, what=what, via_directory=True)
    if text == "/" or text.startswith("//") or os.path.normpath(text) != text:
        raise RelayAddressError(f"{what}: socket path {text!r} is not in normal form")
    return UnixTarget(Path(text))


def url_relay_address(url: str, *, what: str = "url") -> LoopbackAddress | None:
    """The loopback address a service URL needs relayed, or None for a non-loopback host.

    `localhost` and `*.localhost` (any case, trailing dot) mean 127.0.0.1. Refused for any host
    (a mistake would otherwise silently bypass or misdirect the relay): a scheme other than
    http/https, userinfo, IPv6 literals, percent-encoded or non-ASCII hosts, non-canonical
    numeric IPv4 (`127.1`, `2130706433`, `0x7f.0.0.1`, `0177.0.0.1`), 0.0.0.0/8 (which Linux
    routes to loopback), backslashes, whitespace and control characters. For a loopback host
    also: a missing (default) port, port 0 and ports below 1024.
    """
    if "\\" in url or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        # Parsers disagree about what these mean (WHATWG reads `\\` as `/`, urllib does not).
        raise RelayAddressError(f"{what}: {url!r} has a backslash, whitespace or control character")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise RelayAddressError(f"{what}: {url!r} must be an http:// or https:// URL")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in rest:
        # Anywhere, not only in the authority: parsers disagree on where the authority ends
        # (`http://a?@127.0.0.1/`), and a service URL never needs an `@`.
        raise RelayAddressError(f"{what}: {url!r} has an '@' (userinfo), which is not allowed")
    if authority.startswith("[") or authority.count(":") > 1:
        raise RelayAddressError(f"{what}: {url!r} names an IPv6 host, which cannot be relayed")
    host, has_port, port_text = authority.partition(":")
    host = host.lower().removesuffix(".")
    if not host or not _HOST_CHARS.fullmatch(host):
        raise RelayAddressError(f"{what}: {url!r} has an empty or malformed host")
    loopback: str | None = None
    if host == "localhost" or host.endswith(".localhost"):
        loopback = "127.0.0.1"
    elif _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        ip = _canonical_ipv4(host)
        if ip is None:
            raise RelayAddressError(
                f"{what}: {url!r} writes an IPv4 address in a short or non-decimal form; "
                "use four decimal octets"
            )
        if ip in _ZERO_NET:
            raise RelayAddressError(f"{what}: {url!r} names 0.0.0.0/8 (this host)")
        if is_loopback_host(str(ip)):
            loopback = str(ip)
    if has_port and not _DECIMAL_PORT.fullmatch(port_text):
        raise RelayAddressError(f"{what}: {url!r} has an invalid port {port_text!r}")
    if loopback is None:
        return None
    if not has_port:
        raise RelayAddressError(
            f"{what}: {url!r} is loopback on a default port; relayed ports must be explicit "
            f"and >= {MIN_RELAY_PORT}"
        )
    return LoopbackAddress(_loopback_ip(loopback, what), _parse_port(port_text, what))


def endpoint(
    name: str, listen: str, target: str | Path | None = None, *, launch: str | None = None
) -> RelayEndpoint:
    """Build a checked `RelayEndpoint`; `target` defaults to `listen` (the usual case).

    `target` is a loopback `127.0.0.1:PORT`, or a Unix socket (`unix:/abs/path` or a `Path`);
    `launch` is the launch id the host half names first on every connection (the egress proxy).
    """
    if not _ENDPOINT_NAME.fullmatch(name):
        raise RelayAddressError(f"relay endpoint name {name!r} must match [a-z][a-z0-9_-]*")
    addr = parse_loopback_address(listen, what=f"relay {name}")
    dest = addr if target is None else parse_host_target(target, what=f"relay {name}")
    return RelayEndpoint(name, addr, dest, launch)
