"""Driving the egress proxy in tests: a table resolver, a connector that reaches only the
test's upstream, an upstream that greets and echoes, the proxy served on a Unix socket in a
fresh short directory, and clients that name their launch first as the relay's host half does.

No real name is ever resolved and nothing but loopback is ever connected to: refused cases
assert the connector was never called.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import ssl
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Sequence
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from agentc.egress.egress import Allowlist, EgressProxy, IPAddress, address_refusal
from agentc.egress.egress_policy import launch_line
from agentc.egress.pipe import Streams

ALLOW = Allowlist.parse(["allowed.test", ".suffix.test"])
TEST_PUBLIC = IPv4Address("127.0.0.1")
LAUNCH = str(uuid.uuid4())


def loopback_public_policy(ip: IPAddress) -> str | None:
    """Only the test listener's 127.0.0.1 counts as public; everything else is the real rule."""
    return None if ip == TEST_PUBLIC else address_refusal(ip)


class Resolver:
    def __init__(self, table: dict[str, list[str] | list[list[str]]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append((host, port))
        answer = self.table.get(host)
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if answer and isinstance(answer[0], list):  # successive answers (rebinding)
            return answer[min(len(self.calls), len(answer)) - 1]
        return answer  # type: ignore[return-value]


class Connector:
    """Connects only 127.0.0.1:443 -> the upstream test listener; records every attempt."""

    def __init__(self, upstream_port: int | None) -> None:
        self.upstream_port = upstream_port
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, address: str, port: int) -> Streams:
        self.calls.append((address, port))
        if self.upstream_port is None or address != "127.0.0.1" or port != 443:
            raise ConnectionRefusedError(111, "test connector refuses this address")
        return await asyncio.open_connection("127.0.0.1", self.upstream_port)


async def upstream_server() -> asyncio.Server:
    """Greets first (server-to-client), then echoes `up:` + everything once the client EOFs."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(b"hi\n")
            await writer.drain()
            data = await reader.read()
            writer.write(b"up:" + data)
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


Scenario = Callable[[str, Resolver, Connector, list[dict[str, Any]]], Awaitable[None]]


def run_proxy(
    scenario: Scenario,
    table: dict[str, Any] | None = None,
    *,
    with_upstream: bool = False,
    mode: int = 0o600,
    **options: Any,
) -> tuple[Resolver, Connector, list[dict[str, Any]]]:
    """Serve a proxy on a Unix socket in a fresh short directory (``mode``: the socket's) and
    run ``scenario(socket path, resolver, connector, log)`` against it."""
    resolver = Resolver({"allowed.test": ["127.0.0.1"]} if table is None else table)
    log: list[dict[str, Any]] = []
    where = Path(tempfile.mkdtemp(prefix="eg", dir="/tmp"))

    async def main() -> Connector:
        upstream = await upstream_server() if with_upstream else None
        port = upstream.sockets[0].getsockname()[1] if upstream else None
        connector = Connector(port)
        proxy = EgressProxy(
            ALLOW,
            resolver=resolver,
            policy=loopback_public_policy,
            connector=connector,
            log=log.append,
            **options,
        )
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(where / "proxy.sock"))
        os.chmod(where / "proxy.sock", mode)
        sock.listen(512)
        server = asyncio.create_task(proxy.serve(sock))
        try:
            await scenario(str(where / "proxy.sock"), resolver, connector, log)
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
            if upstream:
                upstream.close()
                await upstream.wait_closed()
        return connector

    try:
        os.chmod(where, 0o711)  # noqa: S103 - another account may try the socket
        connector = asyncio.run(main())
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return resolver, connector, log


async def open_as(path: str, launch: str | None = LAUNCH) -> Streams:
    """A connection as a launch's relay makes it: the launch line first (none: without)."""
    reader, writer = await asyncio.open_unix_connection(path)
    if launch is not None:
        writer.write(launch_line(launch))
    return reader, writer


async def ask(path: str, head: bytes, launch: str | None = LAUNCH) -> tuple[str, bytes, Streams]:
    reader, writer = await open_as(path, launch)
    writer.write(head)
    await writer.drain()
    status = (await reader.readline()).decode().rstrip("\r\n")
    headers = b""
    while status and (line := await reader.readline()) not in (b"\r\n", b""):
        headers += line
    return status, headers, (reader, writer)


async def refused(path: str, head: bytes, launch: str | None = LAUNCH) -> tuple[str, bytes]:
    status, headers, (reader, writer) = await ask(path, head, launch)
    body = await reader.read()
    writer.close()
    await writer.wait_closed()
    return status, headers + body


def connect(host: str, port: int = 443) -> bytes:
    return f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()


def client_hello(name: str | None) -> bytes:
    """A real ClientHello from Python's TLS stack (no SNI when ``name`` is None)."""
    ctx = ssl.create_default_context()
    if name is None:
        ctx.check_hostname = False
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


HELLO = client_hello("allowed.test")
