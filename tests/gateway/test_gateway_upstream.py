"""The gateway's own HTTP/1.1 client to its providers, against raw loopback servers that frame
answers every way HTTP/1.1 allows, break them, stall, close idle connections, and speak TLS."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from agentc.gateway.upstream import Upstream, UpstreamError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and body (content-length framed, as the client sends)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


Check = Callable[[Upstream, list[int]], Awaitable[None]]


def _serve(
    handler: Handler,
    check: Check,
    tls: ssl.SSLContext | None = None,
    client_tls: ssl.SSLContext | None = None,
) -> None:
    """Serve ``handler`` on loopback (TLS with ``tls``) and run ``check`` with a client of it
    (trusting ``client_tls``'s roots instead of certifi's when given)."""
    connections: list[int] = []
    handlers: set[asyncio.Task[None]] = set()

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await handler(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.transport.abort()

    async def main() -> None:
        server = await asyncio.start_server(counted, "127.0.0.1", 0, ssl=tls)
        port = server.sockets[0].getsockname()[1]
        scheme = "https" if tls else "http"
        upstream = Upstream(f"{scheme}://localhost:{port}/base/", connect_timeout_s=5,
                            read_timeout_s=1.0)  # fmt: skip
        if client_tls is not None:
            upstream.tls = client_tls
        try:
            await check(upstream, connections)
        finally:
            upstream.close()
            server.close()
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)
            await server.wait_closed()

    asyncio.run(main())


async def _body(upstream: Upstream, target: str = "/v1/messages") -> tuple[int, bytes]:
    answer = await upstream.send("POST", upstream.prefix + target, [("x-a", "1")], b'{"k": 1}')
    try:
        data = b"".join([c async for c in answer.chunks()])
    finally:
        await answer.aclose()  # as the gateway's pump does, whatever happened
    return answer.status_code, data


def test_each_framing_is_read_and_keep_alive_connections_are_reused() -> None:
    answers = [
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nx-trailer: t\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nto the end",
    ]
    seen: list[tuple[bytes, bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            seen.append(await _request(reader))
            writer.write(answers.pop(0))
            await writer.drain()
            if b"connection: close" in seen[-1][0] or not answers:
                return

    async def check(upstream: Upstream, connections: list[int]) -> None:
        got = [await _body(upstream) for _ in range(4)]
        assert got == [(200, b"hello"), (200, b"abcdefg"), (204, b""), (200, b"to the end")]
        assert len(connections) == 1  # one connection for all four

    _serve(handler, check)
    head, body = seen[0]
    assert head.startswith(b"POST /base/v1/messages HTTP/1.1\r\n")
    assert b"\r\nx-a: 1\r\n" in head and b"content-length: 8" in head and body == b'{"k": 1}'


def test_an_idle_connection_the_provider_closed_is_not_reused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()  # then closes: the idle connection is gone

    async def check(upstream: Upstream, connections: list[int]) -> None:
        assert await _body(upstream) == (200, b"ok")
        await asyncio.sleep(0.2)
        assert await _body(upstream) == (200, b"ok")
        assert len(connections) == 2

    _serve(handler, check)


def test_an_answer_not_read_to_the_end_closes_its_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n0123456789")
            await writer.drain()

    async def check(upstream: Upstream, connections: list[int]) -> None:
        answer = await upstream.send("POST", "/x", [], b"")
        await answer.aclose()  # nothing read
        assert await _body(upstream) == (200, b"0123456789")
        assert len(connections) == 2

    _serve(handler, check)


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", "RemoteProtocolError"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "RemoteProtocolError"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab", "RemoteProtocolError"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabXY", "RemoteProtocolError"),
    ],
)
def test_a_broken_answer_is_an_error_named_for_the_log(raw: bytes, name: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(raw)
        await writer.drain()

    async def check(upstream: Upstream, _c: list[int]) -> None:
        with pytest.raises(UpstreamError) as err:
            await _body(upstream)
        assert err.value.name in (name, "ReadError", "ReadTimeout")

    _serve(handler, check)


@pytest.mark.parametrize(
    "head",
    [
        b"SMTP hello\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
    ],
)
def test_a_bad_answer_head_is_refused(head: bytes) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(2)

    async def check(upstream: Upstream, _c: list[int]) -> None:
        with pytest.raises(UpstreamError) as err:
            await upstream.send("POST", "/x", [], b"")
        assert err.value.name == "RemoteProtocolError"

    _serve(handler, check)


def test_a_stalled_provider_times_out_and_a_closed_port_is_unreachable() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nsome")
        await writer.drain()
        await asyncio.sleep(5)

    async def check(upstream: Upstream, _c: list[int]) -> None:
        with pytest.raises(UpstreamError) as err:
            await _body(upstream)
        assert err.value.name == "ReadTimeout"
        closed = Upstream("http://127.0.0.1:1", connect_timeout_s=5, read_timeout_s=1)
        with pytest.raises(UpstreamError) as refused:
            await closed.send("GET", "/", [], b"")
        assert refused.value.name == "ConnectError"

    _serve(handler, check)


def test_https_with_the_providers_certificate_checked(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nTLS")
        await writer.drain()

    async def check(upstream: Upstream, _c: list[int]) -> None:
        assert await _body(upstream) == (200, b"TLS")

    _serve(handler, check, tls=server_tls, client_tls=trusting)

    async def untrusted(upstream: Upstream, _c: list[int]) -> None:
        with pytest.raises(UpstreamError) as err:  # certifi's roots do not know it
            await _body(upstream)
        assert err.value.name == "ConnectError"

    _serve(handler, untrusted, tls=server_tls)
