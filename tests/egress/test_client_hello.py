"""The ClientHello reader: real hellos from Python's TLS stack, and hostile byte strings."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from agentc.egress.client_hello import (
    MAX_HELLO_BYTES,
    HelloError,
    read_client_hello,
    server_name,
)


def real_hello(name: str | None) -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = name is not None
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def parse(data: bytes) -> tuple[bytes, str | None]:
    async def main() -> tuple[bytes, str | None]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        raw, body = await read_client_hello(reader)
        return raw, server_name(body)

    return asyncio.run(main())


def record(payload: bytes, kind: int = 0x16) -> bytes:
    return bytes([kind, 3, 1]) + len(payload).to_bytes(2, "big") + payload


def hello_with_extensions(extensions: bytes) -> bytes:
    body = b"\x03\x03" + b"\x00" * 32 + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    body += len(extensions).to_bytes(2, "big") + extensions
    return record(b"\x01" + len(body).to_bytes(3, "big") + body)


def sni(*names: tuple[int, bytes]) -> bytes:
    entries = b"".join(bytes([k]) + len(n).to_bytes(2, "big") + n for k, n in names)
    data = len(entries).to_bytes(2, "big") + entries
    return b"\x00\x00" + len(data).to_bytes(2, "big") + data


def test_real_hellos() -> None:
    hello = real_hello("api.example.test")
    raw, name = parse(hello + b"after")
    assert raw == hello and name == "api.example.test"  # nothing after the hello is consumed
    assert parse(real_hello(None))[1] is None


def test_a_hello_split_over_records() -> None:
    message = real_hello("split.test")[5:]
    data = b"".join(record(message[i : i + 7]) for i in range(0, len(message), 7))
    assert parse(data) == (data, "split.test")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", "did not start a TLS handshake"),
        (record(b"\x01\x00", kind=0x17), "did not start a TLS handshake"),
        (record(b"\x02\x00\x00\x00"), "not a ClientHello"),
        (record(b""), "length out of range"),
        (record(b"\x01\xff\xff\xff"), "longer than the proxy accepts"),
        (record(b"\x01\x00\x00\x01\x00\x00"), "data after the ClientHello"),
        (record(b"\x01\x00\x00\x04\x03\x03\x00\x00"), "truncated"),
        (hello_with_extensions(sni((0, b"a.test")) * 2), "appears twice"),
        (hello_with_extensions(sni((0, b"a.test"), (0, b"b.test"))), "2 host names"),
        (hello_with_extensions(sni((1, b"a.test"))), "0 host names"),
        (hello_with_extensions(sni((0, "é.test".encode()))), "not ASCII"),
        (hello_with_extensions(b"\x00\x00\x00\x09" + b"\x00" * 4), "truncated"),
    ],
    ids=[
        "http",
        "app data",
        "server hello",
        "empty record",
        "huge",
        "trailing",
        "short",
        "two sni",
        "two names",
        "no host name",
        "non-ascii",
        "lying length",
    ],  # fmt: skip
)
def test_hostile_hellos_are_refused(data: bytes, why: str) -> None:
    with pytest.raises(HelloError, match=why):
        parse(data)


def test_a_client_that_stops_mid_record() -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        parse(real_hello("a.test")[:20])
    assert MAX_HELLO_BYTES >= 16 * 1024  # a record's maximum fits
