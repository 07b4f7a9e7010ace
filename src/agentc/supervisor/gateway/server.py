"""Serving the gateway: in the foreground (the CLI) or in a background thread (tests, bench)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

from agentc.supervisor.gateway.app import Gateway
from agentc.supervisor.gateway.control import serve_control


def _uvicorn_config(app: Any, **kw: Any) -> uvicorn.Config:
    # No server/date headers of our own: the provider's reach the harness unchanged.
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=5,
        **kw,
    )


def tcp_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket with TCP_NODELAY (inherited by accepted connections).

    Why: a streamed answer ends with a small write (the last chunk); with Nagle it waits for
    the client's delayed ACK, adding ~40 ms to every call on loopback.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(1024)
    return sock


async def _serve(
    gateway: Gateway, server: uvicorn.Server, sockets: list[socket.socket] | None
) -> None:
    control = await serve_control(gateway.registry, gateway.config.control_socket)
    try:
        await server.serve(sockets=sockets)
    finally:
        control.close()
        await control.wait_closed()
        await gateway.aclose()


def serve_forever(gateway: Gateway, *, on_ready: Any = None) -> None:
    """Run the gateway and its control socket until interrupted (the CLI's foreground)."""
    cfg = gateway.config
    sockets: list[socket.socket] | None = None
    if cfg.unix_socket is not None:
        config = _uvicorn_config(gateway.app, uds=str(cfg.unix_socket))
    else:
        sock = tcp_socket(cfg.host, cfg.port)
        sockets = [sock]
        config = _uvicorn_config(gateway.app)
        if on_ready is not None:
            on_ready(sock.getsockname()[1])
    server = uvicorn.Server(config)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(_serve(gateway, server, sockets))


class ThreadedGateway:
    """The gateway on 127.0.0.1 (port 0 by default) in a daemon thread; ``url`` once started.

    ``control=True`` also serves the control socket (``config.control_socket``), as the CLI does.
    """

    def __init__(
        self, gateway: Gateway, *, host: str = "127.0.0.1", port: int = 0, control: bool = False
    ) -> None:
        self.gateway = gateway
        self.control = control
        self.address = f"{host}:{self._sock_port(host, port)}"
        self.url = f"http://{self.address}"
        self._server = uvicorn.Server(_uvicorn_config(gateway.app))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sock_port(self, host: str, port: int) -> int:
        self._sock = tcp_socket(host, port)
        bound: int = self._sock.getsockname()[1]
        return bound

    def _run(self) -> None:
        with asyncio.Runner(loop_factory=self._server.config.get_loop_factory()) as runner:
            runner.run(self._main())

    async def _main(self) -> None:
        if self.control:
            await _serve(self.gateway, self._server, [self._sock])
            return
        try:
            await self._server.serve(sockets=[self._sock])
        finally:
            await self.gateway.aclose()

    def start(self) -> ThreadedGateway:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("gateway did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> ThreadedGateway:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
