"""The model gateway for tests and benchmarks: served in a thread, driven over its control socket.

:class:`ThreadedGateway` serves a :class:`~agentc.gateway.app.Gateway` on a loopback
port in a daemon thread (optionally with its control socket, as the CLI does).
:class:`ControlClient` issues, revokes and reads sentinels with one control connection per
request, through the launch's own client
(:class:`~agentc.gateway.lease.ControlConnection`); unlike a launch it never holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import uvicorn

from agentc.gateway.app import Gateway
from agentc.gateway.lease import ControlConnection
from agentc.gateway.server import serve_with_control, tcp_socket, uvicorn_config
from agentc.testing.serving import ServerThread


class ThreadedGateway:
    """The gateway on 127.0.0.1 (port 0 by default) in a daemon thread; ``url`` once started.

    ``control=True`` also serves the control socket (``config.control_socket``), as the CLI does.
    """

    def __init__(
        self, gateway: Gateway, *, host: str = "127.0.0.1", port: int = 0, control: bool = False
    ) -> None:
        self.gateway = gateway
        self.control = control
        self._sock = tcp_socket(host, port)
        self.address = f"{host}:{self._sock.getsockname()[1]}"
        self.url = f"http://{self.address}"
        server = uvicorn.Server(uvicorn_config(gateway.app))
        self._thread = ServerThread(server, self._main, what="gateway")

    async def _main(self) -> None:
        server = self._thread.server
        if self.control:
            await serve_with_control(self.gateway, server, [self._sock])
            return
        try:
            await server.serve(sockets=[self._sock])
        finally:
            await self.gateway.aclose()

    def start(self) -> ThreadedGateway:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._thread.stop()

    def __enter__(self) -> ThreadedGateway:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class ControlClient:
    """A blocking control-socket client opening one connection per request (never holding)."""

    def __init__(self, path: Path, *, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with ControlConnection(self.path, timeout=self.timeout) as connection:
            return connection.call(message)

    def issue(self, **fields: Any) -> str:
        return str(self.request({"op": "issue", **fields})["sentinel"])

    def revoke(self, launch_id: str, reason: str = "the launch ended") -> int:
        message = {"op": "revoke", "session": launch_id, "reason": reason}
        return int(self.request(message)["revoked"])

    def status(self, launch_id: str) -> dict[str, Any]:
        status = self.request({"op": "status", "session": launch_id})["status"]
        assert isinstance(status, dict)
        return status
