"""The egress proxy: an allowlisting HTTP CONNECT proxy, the launches' only way to the internet.

Decision order, each step refusing before the next can act (so an unlisted name is never even
resolved, and a refused address is never connected to):

1. the request head (at most 8 KiB, within 10 s) must be `CONNECT host:443 HTTP/1.x`;
2. the host must be a DNS name on the allowlist (exact, or `.suffix` for subdomains only);
3. every resolved address must be public (`address_refusal`);
4. the proxy connects to exactly those checked addresses, never re-resolving the name, so a
   DNS answer cannot change between check and use (rebinding);
5. after ``200``, the client's first bytes must be a TLS ClientHello whose SNI names the
   CONNECT host (:mod:`agentc.egress.client_hello`), else the tunnel closes with a TLS
   ``unrecognized_name`` alert: an allowed name cannot carry a connection to another tenant of
   the CDN serving it.

Before any of that, the connection must come through a launch's relay. The proxy listens on
a Unix socket (:mod:`agentc.egress.egress_command`), so the kernel names the account
that connected (``SO_PEERCRED``): a connection of any account but root, the proxy's own and
the ``accounts`` it serves (host mode's role accounts) is closed at once, before anything is
read, counted or logged. A served connection must then name its launch in its first line
(``agentc-launch <launch id>``, :func:`~agentc.egress.egress_policy.launch_line`, which
the relay's host half writes before any byte of the launch's) within ``identify_timeout``, else
it is refused (408, 400) without ever holding a slot. A launch then holds at most
``max_per_launch`` of the proxy's ``max_clients`` connections at once, and a tunnel on which
no byte moved either way for ``idle_timeout`` is closed.

Every decision is one JSON line on the log stream. Resolver, address policy and connector are
parameters so tests can drive every refusal without touching anything but loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any

from agentc.core.errors import AgentcError
from agentc.core.rules import rfc3339
from agentc.egress import client_hello
from agentc.egress.egress_policy import (
    Allowlist,
    EgressConfigError,
    IPAddress,
    address_refusal,
    is_public_address,
    normalize_host,
    parse_allow_entry,
    parse_launch_line,
)
from agentc.egress.pipe import CHUNK, Streams, open_tcp, splice
from agentc.files import JsonLines
from agentc.files.launchlog import LaunchLogs
from agentc.files.sockets import peer_credentials

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
BACKLOG = 512  # connections the kernel queues until the proxy accepts them
DEFAULT_MAX_PER_LAUNCH = 128
HELLO_TIMEOUT_SECONDS = 10.0
IDENTIFY_TIMEOUT_SECONDS = 5.0
IDLE_TIMEOUT_SECONDS = 300.0
# A fatal TLS alert, unrecognized_name (RFC 8446 section 6): what the client sees on a refusal
# after the tunnel was established, where an HTTP answer no longer fits.
TLS_ALERT_UNRECOGNIZED_NAME = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70])
REFUSAL_LINGER_SECONDS = 2.0

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
AddressPolicy = Callable[[IPAddress], "str | None"]
Connector = Callable[[str, int], Awaitable[Streams]]
LogSink = Callable[[dict[str, Any]], None]

__all__ = [  # the pure rules live in egress_policy; importers may take them from here
    "Allowlist",
    "EgressConfigError",
    "EgressProxy",
    "IPAddress",
    "address_refusal",
    "is_public_address",
    "normalize_host",
    "parse_allow_entry",
]


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


def own_accounts() -> frozenset[int]:
    """The accounts always served: root and the proxy's own."""
    return frozenset({0, os.geteuid()})


@dataclass
class _Decision:
    """What one connection asked for, filled in as its request is read; logged either way.

    At first only the client (``uid N pid N``) is known; then the launch it names; `address`
    is the upstream address tried or refused.
    """

    client: str
    launch: str | None = None
    method: str | None = None
    host: str | None = None
    port: int | None = None
    address: str | None = None


class _Refusal(AgentcError):
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
    max_per_launch: int = DEFAULT_MAX_PER_LAUNCH  # 0: no per-launch cap
    # The uids whose connections are served (SO_PEERCRED); any other is closed at once.
    accounts: frozenset[int] = field(default_factory=own_accounts)
    identify_timeout: float = IDENTIFY_TIMEOUT_SECONDS
    idle_timeout: float = IDLE_TIMEOUT_SECONDS
    hello_timeout: float = HELLO_TIMEOUT_SECONDS
    head_timeout: float = HEAD_TIMEOUT_SECONDS
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
    # Each launch's event log (agentc.files.launchlog): its connections and their bytes.
    launch_logs: LaunchLogs | None = None
    # Strong references to running connections (the loop only holds tasks weakly): those
    # holding a slot, and those still to name their launch (which hold none).
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)
    _naming: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)
    _per_launch: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def _record(self, d: _Decision, allowed: bool, status: int, reason: str) -> None:
        line = {
            "time": rfc3339(time.time_ns() // 1_000_000),
            "client": d.client,
            "launch": d.launch,
            "method": d.method,
            "host": d.host,
            "port": d.port,
            "decision": "allow" if allowed else "refuse",
            "allowed": allowed,
            "status": status,
            "reason": reason,
            "address": d.address,
        }
        keys = ("method", "host", "port", "allowed", "status", "reason", "address")
        line["launch_log_error"] = self._launch_event(d, "connection", {k: line[k] for k in keys})
        if line["launch_log_error"] is None:
            del line["launch_log_error"]
        self.log(line)

    def _launch_event(self, d: _Decision, kind: str, event: dict[str, Any]) -> str | None:
        """Append to the launch's event log; why it failed, or None."""
        if self.launch_logs is None or d.launch is None:
            return None
        try:
            self.launch_logs.append(d.launch, {"event": kind, **event})
        except OSError as exc:
            return exc.strerror or str(exc)
        return None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = self._served(writer)
        task = asyncio.current_task()
        if client is None or task is None:
            # Another account's connection: closed before anything is read, counted or logged
            # (logging it would let that account fill the log).
            writer.transport.abort()
            return
        d = _Decision(client)
        key: str | None = None
        try:
            d.launch = await self._identify(task, reader)
            key = self._admit(task, d.launch)
            upstream = await self._decide(reader, d)
            await self._tunnel((reader, writer), upstream, d)
        except _Refusal as refusal:
            d.address = refusal.address or d.address
            self._record(d, False, refusal.status, refusal.reason)
            await _send_refusal(reader, writer, refusal)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client went away before deciding anything, or during the tunnel
        except Exception as exc:  # fail closed, but still account for the decision
            self._record(d, False, 500, f"internal error: {type(exc).__name__}")
        finally:
            self._release(task, key)
            writer.transport.abort()  # no-op after a finished tunnel

    async def _tunnel(self, client: Streams, upstream: Streams, d: _Decision) -> None:
        """Answer 200, check the ClientHello's server name, then splice (or close both)."""
        reader, writer = client
        spliced = False
        try:
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            try:
                hello = await self._client_hello(reader, d)
            except _Refusal as refusal:
                self._record(d, False, refusal.status, refusal.reason)
                writer.write(TLS_ALERT_UNRECOGNIZED_NAME)
                return
            self._record(d, True, 200, "allowed")
            upstream[1].write(hello)
            spliced = True
            moved, started = [len(hello), 0], time.monotonic()
            try:
                await splice(client, upstream, idle=self.idle_timeout, moved=moved)
            finally:
                closed: dict[str, Any] = {"host": d.host, "port": d.port, "address": d.address}
                closed.update(bytes_up=moved[0], bytes_down=moved[1])
                closed["seconds"] = round(time.monotonic() - started, 3)
                self._launch_event(d, "connection_closed", closed)
        finally:
            if not spliced:
                upstream[1].transport.abort()
                upstream[1].close()

    def _served(self, writer: asyncio.StreamWriter) -> str | None:
        """``uid N pid N`` of the connecting process when its account is served, else None."""
        try:
            peer = peer_credentials(writer.get_extra_info("socket"))
        except (OSError, TypeError):
            return None  # not a Unix socket: no account the kernel vouches for
        return f"uid {peer.uid} pid {peer.pid}" if peer.uid in self.accounts else None

    async def _identify(self, task: asyncio.Task[Any], reader: asyncio.StreamReader) -> str:
        """The launch the connection's first line names, read within ``identify_timeout``;
        meanwhile the connection holds no slot."""
        self._naming.add(task)
        try:
            async with asyncio.timeout(self.identify_timeout):
                line = await reader.readuntil(b"\n")
        except TimeoutError:
            raise _Refusal(408, "the connection did not name its launch in time") from None
        except asyncio.LimitOverrunError:
            line = b""
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise  # closed before a byte: nothing to answer
            line = b""
        finally:
            self._naming.discard(task)
        launch = parse_launch_line(line)
        if launch is None:
            raise _Refusal(400, "the connection did not name its launch (not a launch's relay)")
        return launch

    def _admit(self, task: asyncio.Task[Any], key: str) -> str:
        """Count the connection against the proxy's and its launch's budgets, or refuse it."""
        if len(self._tasks) >= self.max_clients:
            raise _Refusal(503, "too many connections")
        held = self._per_launch.get(key, 0)
        if self.max_per_launch and held >= self.max_per_launch:
            raise _Refusal(503, f"too many connections from this launch ({held})")
        self._tasks.add(task)
        self._per_launch[key] = held + 1
        return key

    def _release(self, task: asyncio.Task[Any], key: str | None) -> None:
        self._tasks.discard(task)
        if key is not None:
            left = self._per_launch.get(key, 1) - 1
            if left > 0:
                self._per_launch[key] = left
            else:
                self._per_launch.pop(key, None)

    async def _client_hello(self, reader: asyncio.StreamReader, d: _Decision) -> bytes:
        """The client's ClientHello, read whole, once its SNI is checked against the host."""
        try:
            async with asyncio.timeout(self.hello_timeout):
                raw, body = await client_hello.read_client_hello(reader)
            name = client_hello.server_name(body)
        except TimeoutError:
            raise _Refusal(408, "TLS ClientHello not received in time") from None
        except client_hello.HelloError as exc:
            raise _Refusal(403, f"not a TLS ClientHello the proxy can check: {exc}") from None
        if name is None:
            raise _Refusal(403, "TLS ClientHello has no server name (SNI)")
        if normalize_host(name) != d.host:
            raise _Refusal(403, f"TLS server name {name[:255]!r} differs from the CONNECT host")
        return raw

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
        """Serve a bound, listening Unix socket until cancelled."""
        server = await asyncio.start_unix_server(
            self.handle, sock=sock, limit=MAX_HEAD_BYTES, backlog=BACKLOG
        )
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
