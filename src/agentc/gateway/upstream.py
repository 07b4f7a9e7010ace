"""The gateway's HTTP/1.1 client to its providers: keep-alive connections, nothing else.

The gateway sends one kind of request (a method, a path, headers and a body it has read whole)
and streams one kind of answer back, so a general client's machinery (httpx and httpcore: a
connection pool with anyio locks and events, cookie jars, URL and header models) was more than
half of the gateway's own time per call (docs/benchmarks.md). This client keeps, per provider,
a stack of idle connections (TCP_NODELAY, TLS for https with certifi's roots when installed);
a connection goes back to it only when its answer was read to the end and neither side said
``connection: close``; an idle connection the provider closed (or that holds stray bytes) is
dropped before reuse. Answers are read as the provider frames them: ``content-length``,
``chunked`` (de-chunked here; the gateway re-frames for its client) or until the connection
closes. Every wait is bounded: ``connect_timeout_s`` to connect, ``read_timeout_s`` for each
read. Errors are :class:`UpstreamError` with a short name for the logs.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agentc.core.errors import AgentcError

MAX_HEAD = 64 * 1024
READ = 65536
IDLE_KEPT = 128  # idle connections kept per provider


class UpstreamError(AgentcError):
    """The provider could not be reached or broke its answer; ``name`` goes in the log."""

    def __init__(self, name: str, detail: str = "") -> None:
        super().__init__(f"{name}: {detail}" if detail else name)
        self.name = name


def _tls_context() -> ssl.SSLContext:
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:  # pragma: no cover - httpx brings certifi
        return ssl.create_default_context()


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self) -> bool:
        """Idle and still open: not closing, and nothing to read (an EOF or stray bytes)."""
        pending = getattr(self.reader, "_buffer", None)  # read but not consumed
        if self.writer.is_closing() or self.reader.at_eof() or pending:
            return False
        sock = self.writer.get_extra_info("socket")
        if sock is None:
            return False
        readable, _, _ = select.select([sock], [], [], 0)
        return not readable

    def close(self) -> None:
        self.writer.transport.abort()


class Headers(Mapping[str, str]):
    """An answer's headers by lower-case name (the last of a repeated one), and all of them in
    the order sent (:meth:`pairs`)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs
        self._by_name = {k.lower(): v for k, v in pairs}

    def pairs(self) -> list[tuple[str, str]]:
        return list(self._pairs)

    def __getitem__(self, name: str) -> str:
        return self._by_name[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


@dataclass
class Answer:
    """One answer being read: its status, headers, and :meth:`chunks` of its body."""

    status_code: int
    headers: Headers
    _conn: _Connection
    _pool: Upstream
    _length: int | None  # None: chunked or until the connection closes
    _chunked: bool
    _reusable: bool
    _read_timeout: float
    _done: bool = field(default=False)

    async def _read(self, coro: object) -> bytes:
        try:
            async with asyncio.timeout(self._read_timeout):
                data: bytes = await coro  # type: ignore[misc]
                return data
        except TimeoutError:
            raise UpstreamError("ReadTimeout") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise UpstreamError("ReadError", type(exc).__name__) from None

    async def chunks(self) -> AsyncIterator[bytes]:
        reader = self._conn.reader
        if self._chunked:
            async for data in self._dechunk(reader):
                yield data
        elif self._length is not None:
            async for data in self._exactly(reader, self._length):
                yield data
        else:
            while data := await self._read(reader.read(READ)):
                yield data
            self._reusable = False
        self._done = True

    async def _exactly(self, reader: asyncio.StreamReader, size: int) -> AsyncIterator[bytes]:
        """The next ``size`` bytes of the answer, as they come; an end before them is an error."""
        while size > 0:
            data = await self._read(reader.read(min(size, READ)))
            if not data:
                raise UpstreamError("RemoteProtocolError", "the answer ended early")
            size -= len(data)
            yield data

    async def _dechunk(self, reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        while True:
            line = await self._read(reader.readuntil(b"\r\n"))
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise UpstreamError("RemoteProtocolError", "a bad chunk size") from None
            if size == 0:
                while (await self._read(reader.readuntil(b"\r\n"))) != b"\r\n":
                    pass  # trailers
                return
            async for data in self._exactly(reader, size):
                yield data
            if await self._read(reader.readexactly(2)) != b"\r\n":
                raise UpstreamError("RemoteProtocolError", "a chunk without its end")

    async def aclose(self) -> None:
        """Done with the answer: its connection goes back for reuse only when read whole."""
        if self._done and self._reusable:
            self._pool.release(self._conn)
        else:
            self._conn.close()
        self._done, self._reusable = True, False


class Upstream:
    """Requests to one provider (``base_url``: its scheme, host and port)."""

    def __init__(self, base_url: str, *, connect_timeout_s: float, read_timeout_s: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url}: not an http or https URL")
        self.host = parts.hostname
        self.prefix = parts.path.rstrip("/")  # a base URL's own path goes before each target
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.authority = parts.netloc
        self.tls = _tls_context() if parts.scheme == "https" else None
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        self._idle: list[_Connection] = []

    def release(self, conn: _Connection) -> None:
        if len(self._idle) < IDLE_KEPT and not conn.writer.is_closing():
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()

    async def _connect(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self.tls, limit=MAX_HEAD
                )
        except TimeoutError:
            raise UpstreamError("ConnectTimeout") from None
        except OSError as exc:
            raise UpstreamError("ConnectError", exc.strerror or str(exc)) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Headers and body go out as one write; with Nagle a small last write would wait
            # for a delayed ACK (~40 ms on loopback).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(reader, writer)

    async def send(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> Answer:
        """Send one request (``target``: path and query) and read its answer's head."""
        conn = await self._connect()
        lines = [f"{method} {target} HTTP/1.1", f"host: {self.authority}"]
        lines += [f"{k}: {v}" for k, v in headers]
        if body or method not in ("GET", "HEAD"):
            lines.append(f"content-length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            conn.writer.write(head + body if len(body) < READ else head)
            if len(body) >= READ:
                conn.writer.write(body)
            await conn.writer.drain()
            return await self._answer(conn, method)
        except UpstreamError:
            conn.close()
            raise
        except (OSError, asyncio.IncompleteReadError) as exc:
            conn.close()
            raise UpstreamError("WriteError", type(exc).__name__) from None

    async def _answer(self, conn: _Connection, method: str) -> Answer:
        try:
            async with asyncio.timeout(self.read_timeout_s):
                raw = await conn.reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            raise UpstreamError("ReadTimeout") from None
        except asyncio.IncompleteReadError:
            raise UpstreamError("RemoteProtocolError", "no answer") from None
        except asyncio.LimitOverrunError:
            raise UpstreamError("RemoteProtocolError", "an answer head too long") from None
        status, items = _head(raw)
        headers = Headers(items)
        framing = (headers.get("transfer-encoding") or "").lower()
        length_text = headers.get("content-length")
        no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
        chunked = "chunked" in framing and not no_body
        length = 0 if no_body else None
        if not chunked and not no_body and length_text is not None:
            if not length_text.strip().isdigit():
                raise UpstreamError("RemoteProtocolError", "a bad content-length")
            length = int(length_text)
        keep = (headers.get("connection") or "").lower() != "close"
        reusable = keep and (chunked or length is not None)
        return Answer(
            status, headers, conn, self, length, chunked, reusable, self.read_timeout_s,
            _done=length == 0,
        )  # fmt: skip


def _head(raw: bytes) -> tuple[int, list[tuple[str, str]]]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise UpstreamError("RemoteProtocolError", "not an HTTP/1.1 answer")
    items = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise UpstreamError("RemoteProtocolError", "a malformed header")
        items.append((name, value.strip()))
    return int(parts[1]), items
