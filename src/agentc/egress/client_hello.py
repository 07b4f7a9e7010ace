"""Reading a TLS ClientHello off a tunnel: its bytes (to forward unchanged) and its SNI name.

The egress proxy checks, after an allowed ``CONNECT host:443``, that the TLS connection the
client then opens names the same host (``server_name``, RFC 6066 section 3); otherwise a
client could CONNECT to an allowed name and reach another tenant of the CDN serving it. Only
what the check needs is parsed (RFC 8446 section 4.1.2 record and handshake framing, the
extensions list); everything else is forwarded as read. The handshake message may span
several records; its total is capped at :data:`MAX_HELLO_BYTES`.
"""

from __future__ import annotations

import asyncio

from agentc.core.errors import AgentcError

RECORD_HANDSHAKE = 0x16
HANDSHAKE_CLIENT_HELLO = 0x01
EXT_SERVER_NAME = 0x0000
NAME_TYPE_HOST = 0x00
MAX_HELLO_BYTES = 64 * 1024


class HelloError(AgentcError, ValueError):
    """The bytes are not a TLS ClientHello this proxy can check; the message says why."""


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, count: int) -> bytes:
        if self.at + count > len(self.data):
            raise HelloError("ClientHello is truncated")
        piece = self.data[self.at : self.at + count]
        self.at += count
        return piece

    def number(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def vector(self, length_size: int) -> bytes:
        return self.take(self.number(length_size))


async def read_client_hello(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """Read whole TLS records until the ClientHello is complete.

    Returns (the raw records, the handshake message body); raises :class:`HelloError` when
    the stream is not TLS or the message is not a ClientHello, and ``IncompleteReadError``
    when the client closes first.
    """
    raw = b""
    message = b""
    needed: int | None = None
    while needed is None or len(message) < needed:
        header = await reader.readexactly(5)
        if header[0] != RECORD_HANDSHAKE or header[1] != 0x03:
            raise HelloError("the client did not start a TLS handshake")
        length = int.from_bytes(header[3:5], "big")
        if length == 0 or len(raw) + 5 + length > MAX_HELLO_BYTES:
            raise HelloError("TLS record length out of range")
        fragment = await reader.readexactly(length)
        raw += header + fragment
        message += fragment
        if needed is None and len(message) >= 4:
            if message[0] != HANDSHAKE_CLIENT_HELLO:
                raise HelloError("the first handshake message is not a ClientHello")
            needed = 4 + int.from_bytes(message[1:4], "big")
            if needed > MAX_HELLO_BYTES:
                raise HelloError("ClientHello longer than the proxy accepts")
    if len(message) != needed:
        raise HelloError("data after the ClientHello in its records")
    return raw, message[4:]


def server_name(body: bytes) -> str | None:
    """The ``host_name`` of the ClientHello body's SNI extension, or None when it has none."""
    cur = _Cursor(body)
    cur.take(2 + 32)  # legacy_version, random
    cur.vector(1)  # legacy_session_id
    cur.vector(2)  # cipher_suites
    cur.vector(1)  # legacy_compression_methods
    if cur.at == len(body):
        return None  # no extensions at all
    extensions = _Cursor(cur.vector(2))
    if cur.at != len(body):
        raise HelloError("data after the ClientHello extensions")
    found: str | None = None
    seen: set[int] = set()
    while extensions.at < len(extensions.data):
        kind = extensions.number(2)
        data = extensions.vector(2)
        if kind in seen:
            raise HelloError(f"extension {kind} appears twice")
        seen.add(kind)
        if kind == EXT_SERVER_NAME:
            found = _host_name(data)
    return found


def _host_name(data: bytes) -> str:
    outer = _Cursor(data)
    names = _Cursor(outer.vector(2))
    if outer.at != len(data):
        raise HelloError("data after the server_name list")
    hosts: list[bytes] = []
    while names.at < len(names.data):
        kind = names.number(1)
        name = names.vector(2)
        if kind == NAME_TYPE_HOST:
            hosts.append(name)
    if len(hosts) != 1:
        raise HelloError(f"server_name holds {len(hosts)} host names, not one")
    try:
        return hosts[0].decode("ascii")
    except UnicodeDecodeError:
        raise HelloError("server_name is not ASCII") from None
