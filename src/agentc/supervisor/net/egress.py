"""The egress proxy: an allowlisting HTTP CONNECT proxy, the launches' only way to the internet.

Decision order, each step refusing before the next can act (so an unlisted name is never even
resolved, and a refused address is never connected to):

1. the request head (at most 8 KiB, within 10 s) must be `CONNECT host:443 HTTP/1.x`;
2. the host must be a DNS name on the allowlist (exact, or `.suffix` for subdomains only);
3. every resolved address must be public (`address_refusal`);
4. the proxy connects to exactly those checked addresses, never re-resolving the name, so a
   DNS answer cannot change between check and use (rebinding).

Every decision is one JSON line on the log stream. Resolver, address policy and connector are
parameters so tests can drive every refusal without touching anything but loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from ipaddress import IPv4Address, IPv6Address, IPv6Network, ip_address, ip_network
from pathlib import Path
from typing import Any

import click

from agentc.core.errors import SupervisorError
from agentc.files import JsonLines
from agentc.supervisor.net.addresses import (
    LoopbackAddress,
    RelayAddressError,
    parse_loopback_address,
)
from agentc.supervisor.net.pipe import CHUNK, Streams, listen_tcp, open_tcp, splice

DEFAULT_LISTEN = "127.0.0.1:3128"
DEFAULT_ALLOW = (
    "api.anthropic.com",
    ".claude.ai",
    "claude.ai",
    "console.anthropic.com",
    "platform.claude.com",
    "api.openai.com",
    "auth.openai.com",
    "chatgpt.com",
    ".chatgpt.com",
    "github.com",
    "api.github.com",
    "codeload.github.com",
    ".githubusercontent.com",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
)
ALLOWED_PORT = 443
MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_CLIENTS = 512
REFUSAL_LINGER_SECONDS = 2.0

IPAddress = IPv4Address | IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
AddressPolicy = Callable[[IPAddress], "str | None"]
Connector = Callable[[str, int], Awaitable[Streams]]
LogSink = Callable[[dict[str, Any]], None]


class EgressConfigError(SupervisorError):
    """An egress proxy setting (listen address, allowlist entry) is invalid."""


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


# ---------------------------------------------------------------------------------------------
# Defaults for the injected parts


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """Resolve with the system resolver; unique addresses in the order returned."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def direct_connector(address: str, port: int) -> Streams:
    """Connect to a numeric, already checked address; no resolution happens here."""
    return await open_tcp(address, port)


def json_line_sink(lines: JsonLines) -> LogSink:
    """Each decision as one JSON line; a closed or failing log never stops the proxy."""

    def sink(record: dict[str, Any]) -> None:
        with contextlib.suppress(OSError, ValueError):
            lines.write(record)

    return sink


# ---------------------------------------------------------------------------------------------
# The proxy


@dataclass
class _Decision:
    """What one connection asked for, filled in as its request is read; logged either way.

    At first only the client is known; `address` is the upstream address tried or refused.
    """

    client: str
    method: str | None
    host: str | None
    port: int | None
    address: str | None


class _Refusal(Exception):
    def __init__(self, status: int, reason: str, address: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.address = address


_STATUS_TEXT = {
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class EgressProxy:
    """The proxy's decisions and tunnels; `serve()` runs it on a listening socket."""

    allowlist: Allowlist
    resolver: Resolver = system_resolver
    policy: AddressPolicy = address_refusal
    connector: Connector = direct_connector
    log: LogSink = field(default_factory=lambda: json_line_sink(JsonLines(sys.stdout)))
    max_clients: int = DEFAULT_MAX_CLIENTS
    head_timeout: float = HEAD_TIMEOUT_SECONDS
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
    # Strong references to running connections (the loop only holds tasks weakly).
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)

    def _record(self, d: _Decision, allowed: bool, status: int, reason: str) -> None:
        self.log(
            {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "client": d.client,
                "method": d.method,
                "host": d.host,
                "port": d.port,
                "decision": "allow" if allowed else "refuse",
                "allowed": allowed,
                "status": status,
                "reason": reason,
                "address": d.address,
            }
        )

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        d = _Decision(client, None, None, None, None)
        task = asyncio.current_task()
        try:
            if task is None or len(self._tasks) >= self.max_clients:
                raise _Refusal(503, "too many connections")
            self._tasks.add(task)
            upstream = await self._decide(reader, d)
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            self._record(d, True, 200, "allowed")
            await splice((reader, writer), upstream)
        except _Refusal as refusal:
            d.address = refusal.address or d.address
            self._record(d, False, refusal.status, refusal.reason)
            await _send_refusal(reader, writer, refusal)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client went away before deciding anything, or during the tunnel
        except Exception as exc:  # fail closed, but still account for the decision
            self._record(d, False, 500, f"internal error: {type(exc).__name__}")
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.transport.abort()  # no-op after a finished tunnel

    async def _decide(self, reader: asyncio.StreamReader, d: _Decision) -> Streams:
        head = await self._read_head(reader)
        try:
            request_line = head.split(b"\r\n", 1)[0].decode("ascii")
        except UnicodeDecodeError:
            raise _Refusal(400, "request line is not ASCII") from None
        parts = request_line.split(" ")
        if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
            raise _Refusal(400, "malformed request line")
        d.method, target = parts[0][:32], parts[1]
        if d.method != "CONNECT":
            raise _Refusal(405, f"method {d.method} is not allowed; only CONNECT")
        raw_host, sep, port_text = target.rpartition(":")
        if not sep or not port_text.isdigit() or not port_text.isascii() or len(port_text) > 5:
            raise _Refusal(400, "CONNECT target must be host:port")
        d.port = int(port_text)
        d.host = raw_host[:255]
        host = normalize_host(raw_host)
        if host is None:
            raise _Refusal(403, "host is not a DNS name (IP literals are not allowed)")
        d.host = host
        if d.port != ALLOWED_PORT:
            raise _Refusal(403, f"port {d.port} is not allowed; only {ALLOWED_PORT}")
        if not self.allowlist.allows(host):
            raise _Refusal(403, "host is not on the allowlist")
        addresses = await self._resolve(host)
        for ip in addresses:
            why = self.policy(ip)
            if why is not None:
                raise _Refusal(403, f"address is not public ({why})", str(ip))
        return await self._connect(addresses, d)

    async def _read_head(self, reader: asyncio.StreamReader) -> bytes:
        try:
            async with asyncio.timeout(self.head_timeout):
                return await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            raise _Refusal(408, "request head not received in time") from None
        except asyncio.LimitOverrunError:
            raise _Refusal(431, f"request head longer than {MAX_HEAD_BYTES} bytes") from None
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise _Refusal(400, "connection closed inside the request head") from None
            raise

    async def _resolve(self, host: str) -> list[IPAddress]:
        try:
            answers = await self.resolver(host, ALLOWED_PORT)
        except Exception as exc:  # an injected resolver may raise anything
            raise _Refusal(502, f"cannot resolve host: {exc}") from None
        try:
            addresses = [ip_address(a) for a in answers]
        except ValueError as exc:
            raise _Refusal(502, f"resolver returned a non-address: {exc}") from None
        if not addresses:
            raise _Refusal(502, "host has no addresses")
        return addresses

    async def _connect(self, addresses: Sequence[IPAddress], d: _Decision) -> Streams:
        last = "no address"
        for ip in addresses:
            d.address = str(ip)
            try:
                async with asyncio.timeout(self.connect_timeout):
                    return await self.connector(str(ip), ALLOWED_PORT)
            except TimeoutError:
                last = "timed out"
            except OSError as exc:
                last = exc.strerror or str(exc)
        raise _Refusal(504 if last == "timed out" else 502, f"cannot connect: {last}")

    async def serve(self, sock: socket.socket) -> None:
        """Serve a bound, listening socket until cancelled."""
        server = await asyncio.start_server(self.handle, sock=sock, limit=MAX_HEAD_BYTES)
        async with server:
            await server.serve_forever()


async def _send_refusal(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refusal: _Refusal
) -> None:
    text = _STATUS_TEXT.get(refusal.status, "Error")
    body = f"{refusal.status} {text}: {refusal.reason}\n".encode()
    head = (
        f"HTTP/1.1 {refusal.status} {text}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        + ("Allow: CONNECT\r\n" if refusal.status == 405 else "")
        + "Connection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError, TimeoutError):
        writer.write(head.encode() + body)
        if writer.can_write_eof():
            writer.write_eof()
        # Closing with unread input makes the kernel send RST, which can destroy the answer
        # before the client reads it: give the client a moment to close its side first.
        async with asyncio.timeout(REFUSAL_LINGER_SECONDS):
            while await reader.read(CHUNK):
                pass
        writer.close()
        await writer.wait_closed()


def parse_listen(address: str) -> LoopbackAddress:
    """The proxy's listen address: IPv4 loopback only, port >= 1024 (the relay's rules)."""
    try:
        return parse_loopback_address(address, what="egress_listen")
    except RelayAddressError as exc:
        raise EgressConfigError(str(exc)) from None


def listen_socket(address: str) -> socket.socket:
    """Bind the proxy's listening socket on `address` (see `parse_listen`)."""
    return listen_tcp(parse_listen(address), backlog=512, who="egress proxy ")


@click.command("egress-proxy")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, help="IPv4 loopback:port.")
@click.option("--allow", "allow", multiple=True, help="Extra allowlist entry: host or .suffix.")
@click.option("--no-default-allow", is_flag=True, help="Use only the --allow entries.")
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append decision lines here (mode 0600) instead of stdout.",
)
def command(
    listen: str, allow: tuple[str, ...], no_default_allow: bool, log_path: Path | None
) -> None:
    """Allowlisting CONNECT proxy for launches (port 443, public addresses only)."""
    entries = list(allow) if no_default_allow else [*DEFAULT_ALLOW, *allow]
    try:
        allowlist = Allowlist.parse(entries)
        parse_listen(listen)
    except EgressConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        sock = listen_socket(listen)
    except SupervisorError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        log = JsonLines(sys.stdout) if log_path is None else JsonLines.open(log_path)
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot open egress log {log_path}: {exc.strerror}") from None
    try:
        asyncio.run(EgressProxy(allowlist, log=json_line_sink(log)).serve(sock))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if log_path is not None:
            log.close()


if __name__ == "__main__":
    command()
