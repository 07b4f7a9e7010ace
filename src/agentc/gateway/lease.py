"""The control-socket client, and a launch's hold on its sentinel through it.

:class:`ControlConnection` is the one client of the gateway's control socket (``control.py``):
one blocking Unix-socket connection, one JSON line out and one back per call. It is created
close-on-exec, so it never reaches the harness.

:class:`Lease` is how a launch uses it: it opens one connection, asks for a sentinel with
``"hold": true`` and keeps the connection open for the whole launch. At the end it reads the
launch's status (which cap, if any, refused a call) and revokes the launch's sentinels. If the
launch dies without doing so (an exception, SIGKILL), the kernel closes the connection and the
gateway revokes the held sentinels itself, so a sentinel never outlives its launch.
"""

from __future__ import annotations

import contextlib
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.files.sockets import sun_path
from agentc.gateway.errors import GatewayError
from agentc.gateway.sentinels import Grant


class ControlConnection:
    """One connection to the gateway's control socket; errors name the socket, never a token."""

    def __init__(self, path: Path, *, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buffer = b""

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        if self._sock is not None:
            raise GatewayError("the control connection is already open")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec by default
        sock.settimeout(self.timeout)
        try:
            with sun_path(str(self.path)) as short:  # a long path: through its directory
                sock.connect(short)
        except OSError as exc:
            sock.close()
            raise GatewayError(
                f"model gateway control socket {self.path}: {exc.strerror or exc} "
                "(is `agentc-supervisor model-gateway` running?)"
            ) from None
        self._sock = sock

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its answer; a refusal raises :class:`GatewayError`."""
        sock = self._sock
        if sock is None:
            raise GatewayError("the control connection is not open")
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

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
            self._buffer = b""

    def __enter__(self) -> ControlConnection:
        self.connect()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class LeaseRequest:
    """What the supervisor asks the gateway for: one sentinel bound to one launch."""

    control: Path
    grant: Grant

    def issue_message(self) -> dict[str, Any]:
        return {"op": "issue", "hold": True, **self.grant.message()}


@dataclass(frozen=True)
class LeaseEnd:
    """How the launch ended at the gateway: sentinels revoked, the cap that refused a call."""

    revoked: int
    cap: str | None
    calls: int
    # The first refusal that ended the launch's model access: {kind, name, reason}, or None.
    stop: dict[str, str] | None = None


class Lease:
    """One launch's sentinel, held over one control connection (see the module docstring)."""

    def __init__(self, request: LeaseRequest, *, timeout: float = 10.0) -> None:
        self.request = request
        self.connection = ControlConnection(request.control, timeout=timeout)

    def open(self) -> str:
        """Connect and issue; returns the sentinel. Errors name the socket, never a token."""
        if self.connection.is_open:
            raise GatewayError("the lease is already open")
        self.connection.connect()
        try:
            answer = self.connection.call(self.request.issue_message())
        except BaseException:
            self.connection.close()
            raise
        return str(answer["sentinel"])

    def close(self, reason: str = "the launch ended") -> LeaseEnd | None:
        """Read the launch's status, revoke its sentinels and let go of the connection.

        Returns None when the gateway could not be asked (it went away); closing the connection
        then still revokes, if the gateway is alive to notice.
        """
        if not self.connection.is_open:
            return None
        launch_id = self.request.grant.launch_id
        try:
            status = self.connection.call({"op": "status", "session": launch_id})["status"]
            revoke = {"op": "revoke", "session": launch_id, "reason": reason}
            revoked = int(self.connection.call(revoke)["revoked"])
        except GatewayError:
            return None
        finally:
            self.connection.close()
        cap = status.get("cap") if isinstance(status, dict) else None
        sentinels = status.get("sentinels") if isinstance(status, dict) else None
        calls = sum(int(s.get("calls", 0)) for s in sentinels or [] if isinstance(s, dict))
        stop = status.get("stop") if isinstance(status, dict) else None
        stop = {str(k): str(v) for k, v in stop.items()} if isinstance(stop, dict) else None
        return LeaseEnd(revoked, str(cap) if cap else None, calls, stop)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
