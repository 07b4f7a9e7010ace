"""The helper's socket: bind it safely, check each client's launch, read one request, answer.

Connections are served one at a time, so two requests never race for a ref. Each one:

1. the client's pid (``SO_PEERCRED``) must descend from the launch's root process, else the
   helper answers "connection is not from this helper's launch" and closes without reading;
2. one header line of at most :data:`~agentc.push.protocol.MAX_HEADER_BYTES` bytes;
3. the bundle, until the client shuts its side down, at most ``max_bundle_bytes``; every read
   waits at most ``io_timeout`` seconds;
4. one answer line.

The helper stops on SIGTERM, SIGINT, or when the launch's root process is gone (a
parent-death signal, and a check every second), removing its socket.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from agentc.files import JsonLines
from agentc.files.procs import ask_parent_death_signal, start_ticks
from agentc.files.sockets import name_fits, sun_path
from agentc.push.peer import descends_from, peer_pid
from agentc.push.protocol import (
    MAX_BUNDLE_BYTES,
    MAX_HEADER_BYTES,
    NOT_LAUNCH,
    ProtocolError,
    encode_answer,
    parse_request,
    refusal,
)
from agentc.push.publisher import Publisher
from agentc.push.repo import Refusal

_POLL = 1.0
_STAGING = ".new-{:08x}"


class Stop(BaseException):
    """A signal asked the helper to stop (not an :class:`Exception`: nothing swallows it)."""


@dataclass(frozen=True)
class Limits:
    max_bundle_bytes: int = MAX_BUNDLE_BYTES
    io_timeout: float = 60.0


def log(message: str) -> None:
    print(f"agentc-push: {message}", file=sys.stderr, flush=True)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _one_line(text: str) -> str:
    """``text`` (it may quote the agent's input) without line breaks or control characters."""
    return _CONTROL.sub("?", text)


def push_event(answer: dict[str, object], seconds: float) -> dict[str, object]:
    """One push as the launch's event log records it (docs/push.md)."""
    event: dict[str, object] = {"event": "push", "ok": answer["ok"], "seconds": round(seconds, 3)}
    if answer["ok"]:
        event.update(ref=answer["ref"], revision=answer["revision"])
    else:
        event["error"] = str(answer["error"])[:1000]
    return event


def bind(path: Path) -> socket.socket:
    """A listening socket at ``path`` (mode 0660), bound under a staging name and renamed; a
    path too long for ``sun_path`` is bound through its directory (only the name must fit)."""
    staging = f"{path}{_STAGING.format(os.getpid())}"
    if not path.is_absolute() or not name_fits(staging):
        raise ValueError(f"the socket path must be absolute and its name short: {path}")
    try:
        existing = path.lstat()
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(existing.st_mode):
            raise ValueError(f"{path} exists and is not a socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            with sun_path(staging) as short:
                listener.bind(short)
        finally:
            os.umask(old)
        os.chmod(staging, 0o660)
        listener.listen(8)
        os.rename(staging, path)
    except BaseException:
        listener.close()
        if os.path.lexists(staging):
            os.unlink(staging)
        raise
    return listener


def _read_header(conn: socket.socket) -> tuple[bytes, bytes]:
    """The header line and what followed it in the same reads."""
    data = b""
    while b"\n" not in data:
        if len(data) > MAX_HEADER_BYTES:
            break
        chunk = conn.recv(MAX_HEADER_BYTES + 1)
        if not chunk:
            raise ProtocolError("the connection ended before the request header")
        data += chunk
    line, newline, rest = data.partition(b"\n")
    if not newline or len(line) > MAX_HEADER_BYTES:
        raise ProtocolError(f"the request header exceeds {MAX_HEADER_BYTES} bytes")
    return line, rest


def _receive(conn: socket.socket, first: bytes, work_dir: Path, limit: int) -> Path:
    """Read the bundle into a private file in ``work_dir``; refuse one over ``limit`` bytes."""
    fd, name = tempfile.mkstemp(prefix="incoming-", suffix=".bundle", dir=work_dir)
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            size = len(first)
            out.write(first)
            while size <= limit:
                chunk = conn.recv(1024 * 1024)
                if not chunk:
                    break
                size += len(chunk)
                out.write(chunk)
        if size > limit:
            raise Refusal(f"the bundle exceeds {limit} bytes")
        if size == 0:
            raise Refusal("the request carries no bundle")
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


class Helper:
    """Serves one launch's requests on ``listener`` until stopped."""

    def __init__(
        self,
        listener: socket.socket,
        publisher: Publisher,
        root: int,
        limits: Limits,
        events: JsonLines | None = None,
    ) -> None:
        self.events = events  # one JSON line per push (the launch's event log reads them)
        self.listener = listener
        self.publisher = publisher
        self.root = root
        self.root_start = start_ticks(root)
        self.limits = limits

    def root_alive(self) -> bool:
        return self.root_start is not None and start_ticks(self.root) == self.root_start

    def serve_forever(self) -> None:
        self.listener.settimeout(_POLL)
        while self.root_alive():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                self.serve(conn)
        log(f"the launch's root process {self.root} is gone; stopping")

    def serve(self, conn: socket.socket) -> None:
        conn.settimeout(self.limits.io_timeout)
        try:
            pid = peer_pid(conn)
        except OSError:
            pid = 0
        if not descends_from(pid, self.root):
            log(f"refused a connection from pid {pid}: {NOT_LAUNCH}")
            self._answer(conn, refusal(NOT_LAUNCH))
            return
        started = time.monotonic()
        try:
            line, rest = _read_header(conn)
            request = parse_request(line)
            answer = self.publisher.publish(
                request,
                lambda: _receive(
                    conn, rest, self.publisher.repo.path, self.limits.max_bundle_bytes
                ),
            )
        except (ProtocolError, Refusal) as exc:
            answer = refusal(str(exc))
        except TimeoutError:
            answer = refusal(f"timed out: nothing received for {self.limits.io_timeout:g} s")
        except OSError as exc:
            log(f"pid {pid}: connection failed: {exc}")
            return
        except Exception as exc:  # one request's failure must not end the launch's helper
            answer = refusal(f"the helper failed: {type(exc).__name__}: {exc}")
        took = time.monotonic() - started
        outcome = f"ok {answer['ref']}" if answer["ok"] else f"refused: {answer['error']}"
        log(f"pid {pid}: {_one_line(outcome)} ({took:.1f} s)")
        if self.events is not None:
            with contextlib.suppress(OSError, ValueError):
                self.events.write(push_event(answer, took))
        self._answer(conn, answer)

    @staticmethod
    def _answer(conn: socket.socket, answer: dict[str, object]) -> None:
        try:
            conn.sendall(encode_answer(answer))
        except OSError:
            pass


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def run(
    socket_path: Path,
    publisher: Publisher,
    parent_pid: int | None,
    limits: Limits,
    events: JsonLines | None = None,
) -> int:
    """Serve until stopped; the exit status."""
    if parent_pid is not None:
        ask_parent_death_signal(signal.SIGTERM)
        if start_ticks(parent_pid) is None:
            log(f"the parent process {parent_pid} is already gone")
            return 1
    root = parent_pid if parent_pid is not None else os.getppid()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        listener = bind(socket_path)
    except (OSError, ValueError) as exc:
        log(f"cannot bind {socket_path}: {exc}")
        return 1
    bound = os.stat(socket_path)
    helper = Helper(listener, publisher, root, limits, events)
    log(f"serving {socket_path} for launch {publisher.launch} of task {publisher.task}")
    try:
        helper.serve_forever()
    except Stop as stop:
        log(f"stopping on {stop}")
    finally:
        listener.close()
        try:
            now = os.stat(socket_path)
            if (now.st_dev, now.st_ino) == (bound.st_dev, bound.st_ino):
                os.unlink(socket_path)
        except OSError:
            pass
    return 0
