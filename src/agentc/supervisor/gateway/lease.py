"""A launch's hold on its sentinel: issued before the harness starts, revoked when it ends.

The launch opens one connection to the gateway's control socket, asks for a sentinel with
``"hold": true`` and keeps the connection open for the whole launch. At the end it reads the
session's status (which cap, if any, refused a call) and revokes the session's sentinels. If
the launch dies without doing so (an exception, SIGKILL), the kernel closes the connection and
the gateway revokes the held sentinels itself (``control.py``), so a sentinel never outlives
its launch.

The connection is a plain blocking socket created close-on-exec: it never reaches the harness.
"""

from __future__ import annotations

import contextlib
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.supervisor.gateway.errors import GatewayError


@dataclass(frozen=True)
class LeaseRequest:
    """What the supervisor asks the gateway for: one sentinel bound to one launch."""

    control: Path
    session: str
    attempt: str
    generation: int
    upstream: str
    role: str = "impl"
    task: str | None = None
    launch_usd: float | None = None
    # The launch's agent session (agentns), named on every ledger row and log line.
    agentns_session_id: str | None = None
    agentns_mode: str | None = None

    def issue_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "op": "issue",
            "hold": True,
            "session": self.session,
            "attempt": self.attempt,
            "generation": self.generation,
            "upstream": self.upstream,
            "role": self.role,
        }
        if self.task:
            message["task"] = self.task
        if self.launch_usd is not None:
            message["launch_usd"] = self.launch_usd
        if self.agentns_session_id:
            message["agentns_session_id"] = self.agentns_session_id
            message["agentns_mode"] = self.agentns_mode
        return message


@dataclass(frozen=True)
class LeaseEnd:
    """How the session ended at the gateway: sentinels revoked, the cap that refused a call."""

    revoked: int
    cap: str | None
    calls: int


class Lease:
    """One launch's sentinel, held over one control connection (see the module docstring)."""

    def __init__(self, request: LeaseRequest, *, timeout: float = 10.0) -> None:
        self.request = request
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buffer = b""

    def open(self) -> str:
        """Connect and issue; returns the sentinel. Errors name the socket, never a token."""
        if self._sock is not None:
            raise GatewayError("the lease is already open")
        path = self.request.control
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec by default
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            sock.close()
            raise GatewayError(
                f"model gateway control socket {path}: {exc.strerror or exc} "
                "(is `agentc-supervisor model-gateway` running?)"
            ) from None
        self._sock = sock
        try:
            answer = self._call(self.request.issue_message())
        except BaseException:
            self._drop()
            raise
        return str(answer["sentinel"])

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        sock = self._sock
        if sock is None:
            raise GatewayError("the lease is not open")
        try:
            sock.sendall(json.dumps(message).encode() + b"\n")
            while b"\n" not in self._buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    raise GatewayError("the model gateway closed its control connection")
                self._buffer += chunk
        except OSError as exc:
            raise GatewayError(f"model gateway control: {exc.strerror or exc}") from None
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            raise GatewayError("model gateway control: malformed answer") from None
        if not isinstance(answer, dict):
            raise GatewayError("model gateway control: malformed answer")
        if not answer.get("ok"):
            raise GatewayError(f"model gateway control: {answer.get('error')}")
        return answer

    def close(self, reason: str = "the launch ended") -> LeaseEnd | None:
        """Read the session's status, revoke its sentinels and let go of the connection.

        Returns None when the gateway could not be asked (it went away); closing the connection
        then still revokes, if the gateway is alive to notice.
        """
        if self._sock is None:
            return None
        session = self.request.session
        try:
            status = self._call({"op": "status", "session": session})["status"]
            revoked = int(
                self._call({"op": "revoke", "session": session, "reason": reason})["revoked"]
            )
        except GatewayError:
            return None
        finally:
            self._drop()
        cap = status.get("cap") if isinstance(status, dict) else None
        sentinels = status.get("sentinels") if isinstance(status, dict) else None
        calls = sum(int(s.get("calls", 0)) for s in sentinels or [] if isinstance(s, dict))
        return LeaseEnd(revoked, str(cap) if cap else None, calls)

    def _drop(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
