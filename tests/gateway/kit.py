"""Raw HTTP/1.1 on a loopback socket: paths and bodies no HTTP client library would send as is
(dot segments, a declared length it never sends, an endless chunked body)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from agentc.testing import harnesses


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int = 0  # body bytes the client managed to send
    errors: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def _head(method: str, target: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "host: 127.0.0.1", "connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        out = b""
        while body:
            size_line, _, rest = body.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            out, body = out + rest[:size], rest[size + 2 :]
        body = out
    return status, headers, body


def _read_all(sock: socket.socket, errors: list[str]) -> bytes:
    data = b""
    while True:
        try:
            part = sock.recv(65536)
        except OSError as exc:
            errors.append(f"recv: {type(exc).__name__}")
            return data
        if not part:
            return data
        data += part


def request(
    url: str,
    method: str,
    target: str,
    headers: dict[str, str] | None = None,
    body: bytes | Iterable[bytes] = b"",
    *,
    declared: int | None = None,
) -> RawAnswer:
    """Send one request exactly as given; ``body`` as an iterable goes chunked.

    ``declared`` sets ``content-length`` to a value of the caller's choosing (and sends only
    ``body``). The body is written from a thread while the answer is read, so a server that
    answers before reading the whole body is heard.
    """
    headers = dict(headers or {})
    if isinstance(body, bytes):
        headers["content-length"] = str(len(body) if declared is None else declared)
        chunks: Iterable[bytes] = [body] if body else []
        framing: Callable[[bytes], bytes] = lambda c: c  # noqa: E731
        trailer = b""
    else:
        headers["transfer-encoding"] = "chunked"
        chunks = body
        framing = lambda c: f"{len(c):x}\r\n".encode() + c + b"\r\n"  # noqa: E731
        trailer = b"0\r\n\r\n"
    answer = RawAnswer(0, {}, b"")
    with _connect(url) as sock:
        sock.sendall(_head(method, target, headers))

        def write() -> None:
            try:
                for chunk in chunks:
                    sock.sendall(framing(chunk))
                    answer.sent += len(chunk)
                sock.sendall(trailer)
            except OSError as exc:
                answer.errors.append(f"send: {type(exc).__name__}")

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        raw = _read_all(sock, answer.errors)
        writer.join(timeout=30)
    answer.status, answer.headers, answer.body = _parse(raw) if raw else (0, {}, b"")
    return answer


def needs(name: str) -> None:
    """Skip unless the pinned harness binary is installed (``scripts/setup --dev``)."""
    if not harnesses.available(name):
        pytest.skip(f"{name} is not installed (scripts/setup --dev)")


def wait_for(check: Callable[[], bool], seconds: float = 15.0) -> bool:
    """Poll ``check`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()
