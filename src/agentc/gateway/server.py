"""Serving the gateway and its control socket (the CLI's foreground: :func:`serve_forever`).

Tests and benchmarks serve it in a background thread with
:class:`agentc.testing.gateway.ThreadedGateway`, built on :func:`uvicorn_config` and
:func:`serve_with_control`.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from agentc.gateway.app import Gateway
from agentc.gateway.control import serve_control


def uvicorn_config(app: Any, **kw: Any) -> uvicorn.Config:
    # No server/date headers of our own: the provider's reach the harness unchanged.
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        interface="asgi3",  # a bound method: uvicorn would not tell asgi3 from asgi2
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


async def serve_with_control(
    gateway: Gateway, server: uvicorn.Server, sockets: list[socket.socket] | None
) -> None:
    control = await serve_control(
        gateway.registry, gateway.config.control_socket, gateway.ledger.usage
    )
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
        config = uvicorn_config(gateway.app, uds=str(cfg.unix_socket))
    else:
        sock = tcp_socket(cfg.host, cfg.port)
        sockets = [sock]
        config = uvicorn_config(gateway.app)
        if on_ready is not None:
            on_ready(sock.getsockname()[1])
    server = uvicorn.Server(config)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(serve_with_control(gateway, server, sockets))
