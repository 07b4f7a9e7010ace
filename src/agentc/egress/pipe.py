"""Byte pumping and listening shared by the launch relay's two halves and the egress proxy.

Two streams are spliced both ways with half-close (one side's EOF becomes a `shutdown(SHUT_WR)`
on the other), and both are always closed when the splice ends, so no descriptor outlives its
connection. `LoopThread` hosts an asyncio loop in a daemon thread for synchronous callers; when
it stops, open connections are closed quietly (a normal end, never a traceback).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import socket
import stat
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from agentc.core.errors import SupervisorError
from agentc.egress.addresses import LoopbackAddress
from agentc.files.sockets import sun_path

_T = TypeVar("_T")
Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Opener = Callable[[], Awaitable[Streams]]
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
CHUNK = 65536
DEFAULT_MAX_CONNECTIONS = 256


def report_stderr(message: str) -> None:
    """One diagnostic line on stderr; never raises (stderr may be closed)."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    seen: list[float],
    moved: list[int],
    side: int,
) -> None:
    """Copy until EOF, then half-close the far side so the peer sees our EOF; every chunk
    moved is noted in ``seen[0]`` (the loop's clock) and counted in ``moved[side]``."""
    loop = asyncio.get_running_loop()
    while data := await reader.read(CHUNK):
        seen[0] = loop.time()
        moved[side] += len(data)
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof() and not writer.is_closing():
        writer.write_eof()


async def _idle_watch(seen: list[float], idle: float, writers: list[asyncio.StreamWriter]) -> None:
    """Abort both sides once no byte moved either way for ``idle`` seconds."""
    loop = asyncio.get_running_loop()
    while (left := seen[0] + idle - loop.time()) > 0:
        await asyncio.sleep(left)
    for w in writers:
        w.transport.abort()


async def splice(
    a: Streams, b: Streams, *, idle: float | None = None, moved: list[int] | None = None
) -> None:
    """Pipe `a` and `b` both ways until both directions end; always closes both. With
    ``idle``, a connection on which no byte moved either way for that many seconds is
    dropped (both sides aborted). ``moved`` (two counters) gets the bytes from `a` to `b` and
    from `b` to `a`."""
    seen = [asyncio.get_running_loop().time()]
    moved = moved if moved is not None else [0, 0]
    tasks = [
        asyncio.create_task(_pipe(a[0], b[1], seen, moved, 0)),
        asyncio.create_task(_pipe(b[0], a[1], seen, moved, 1)),
    ]
    watch = [] if idle is None else [asyncio.create_task(_idle_watch(seen, idle, [a[1], b[1]]))]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        if pending or any(t.exception() is not None for t in done):
            # A reset on one side: drop the other too rather than leaving it open forever.
            for w in (a[1], b[1]):
                w.transport.abort()
    except asyncio.CancelledError:
        # The loop is stopping: drop both sides now. A graceful close would wait to flush
        # buffered bytes to a peer that may never read them, and the shutdown with it.
        for w in (a[1], b[1]):
            w.transport.abort()
        raise
    finally:
        for t in [*tasks, *watch]:
            t.cancel()
        await asyncio.gather(*tasks, *watch, return_exceptions=True)
        for w in (a[1], b[1]):
            w.close()
        for w in (a[1], b[1]):
            with contextlib.suppress(Exception):
                await w.wait_closed()


def listen_tcp(addr: LoopbackAddress, *, backlog: int, who: str = "") -> socket.socket:
    """A listening IPv4 socket on a checked loopback address; `who` prefixes the error."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr.host, addr.port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise SupervisorError(f"{who}cannot listen on {addr}: {exc.strerror or exc}") from exc
    return sock


def listen_unix(path: Path, *, mode: int, backlog: int, who: str = "") -> socket.socket:
    """A listening Unix socket at ``path`` (any length: bound through its directory when
    long), given ``mode``. Only a stale socket there is replaced, never another kind of file;
    the caller vouches for the directory (no one else may write it). ``who`` prefixes errors."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise SupervisorError(f"{who}{path} exists and is not a socket; refusing to replace it")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with sun_path(str(path)) as short:
            sock.bind(short)
        os.chmod(path, mode)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise SupervisorError(f"{who}cannot listen on {path}: {exc.strerror or exc}") from exc
    return sock


async def open_tcp(host: str, port: int) -> Streams:
    """Connect to a numeric address on our own socket: no name resolution can happen here."""
    ip = ipaddress.ip_address(host)  # ValueError for a name: this never resolves anything
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
        return await asyncio.open_connection(sock=sock)
    except BaseException:
        sock.close()
        raise


def _open_nofollow(path: Path) -> int:
    """An O_PATH descriptor of the socket at `path`, refusing a symlink in any component.

    Each component is opened relative to the previous one with O_NOFOLLOW, so what is checked
    is what gets connected to: no symlink can be swapped in between the check and the use.
    """
    if not path.is_absolute():
        raise OSError(errno.EINVAL, f"{path} is not an absolute path")
    parts = path.parts
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts[1:], start=1):
            where = Path(*parts[: i + 1])
            try:
                next_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                raise OSError(exc.errno, f"{where}: {exc.strerror}") from None
            os.close(fd)
            fd = next_fd
            mode = os.fstat(fd).st_mode
            last = i == len(parts) - 1
            if stat.S_ISLNK(mode):
                raise OSError(errno.ELOOP, f"{where} is a symlink")
            if not last and not stat.S_ISDIR(mode):
                raise OSError(errno.ENOTDIR, f"{where} is not a directory")
            if last and not stat.S_ISSOCK(mode):
                raise OSError(errno.ENOTSOCK, f"{where} is not a socket")
        return fd
    except BaseException:
        os.close(fd)
        raise


async def open_unix(path: Path) -> Streams:
    """Connect to the Unix socket at `path` without following a symlink anywhere in it.

    The connect goes through `/proc/self/fd/N` of an O_PATH descriptor of the checked socket.
    """
    fd = _open_nofollow(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, f"/proc/self/fd/{fd}")
        return await asyncio.open_unix_connection(sock=sock)
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(fd)


class Forwarder:
    """Serves one listening socket: each accepted connection is spliced to `open_peer()`."""

    def __init__(
        self,
        label: str,
        open_peer: Opener,
        max_connections: int,
        report: Callable[[str], None] = report_stderr,
    ) -> None:
        self.label = label
        self.open_peer = open_peer
        self.max_connections = max_connections
        self.report = report
        # The loop holds tasks only weakly, and a stream protocol holds its reader only weakly:
        # without this set a connection waiting on its far side can be garbage collected.
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> int:
        return len(self.tasks)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if self.active >= self.max_connections or task is None:
            writer.transport.abort()
            return
        self.tasks.add(task)
        try:
            try:
                peer = await self.open_peer()
            except OSError as exc:
                self.report(f"{self.label}: cannot connect: {exc.strerror or exc}")
                return
            await splice((reader, writer), peer)
        except asyncio.CancelledError:
            # The loop is stopping (the launch or its harness ended) with this connection
            # open: a normal end. Returning, not re-raising, keeps asyncio from logging it.
            return
        finally:
            self.tasks.discard(task)
            # Closes the client on a refusal or a cancel before the splice. Not after a splice,
            # which closed it: CPython 3.11 can then have detached the transport from its loop
            # without marking it lost, and abort() would fail.
            if not writer.transport.is_closing():
                writer.transport.abort()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class LoopThread:
    """An asyncio loop in a daemon thread, so a synchronous caller (the launch) can host it."""

    def __init__(self, name: str, report: Callable[[str], None] = report_stderr) -> None:
        self.name = name
        self.report = report
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._exception)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._servers: list[asyncio.AbstractServer] = []

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            # Cancel connection handlers so their `finally` blocks close every socket.
            tasks = asyncio.all_tasks(self.loop)
            for task in tasks:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            # One more turn for the transports' scheduled `connection_lost` (socket close).
            self.loop.run_until_complete(asyncio.sleep(0))
        finally:
            self.loop.close()

    def _exception(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Anything asyncio would log with a traceback becomes one line on `report`."""
        exc = context.get("exception")
        detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        self.report(f"{self.name}: {context.get('message', 'error')}{detail}")

    def start(self) -> None:
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def serve(self, sock: socket.socket, handle: Handler) -> None:
        """Serve an already bound and listening socket (the server takes ownership)."""

        async def start() -> asyncio.AbstractServer:
            if sock.family == socket.AF_UNIX:
                return await asyncio.start_unix_server(handle, sock=sock)
            return await asyncio.start_server(handle, sock=sock)

        self._servers.append(self.call(start()))

    def stop(self) -> None:
        """Close the listeners and every open connection, then end the thread."""
        if not self._thread.is_alive():
            if self._thread.ident is None:
                self.loop.close()
            return

        async def close_servers() -> None:
            for server in self._servers:
                server.close()

        self.call(close_servers())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
