"""The host-side control API: the supervisor issues and revokes sentinels over a Unix socket.

The socket is created mode 0600 in a directory the launches cannot reach (never relayed into a
launch). Protocol: one JSON object per line in, one per line out.

    {"op": "issue", "session": ..., "attempt": ..., "generation": 3, "upstream": "claude",
     "role": "impl", "task": ..., "project": ..., "launch_usd": 5.0, "hold": true,
     "agentns_session_id": ..., "agentns_mode": "prctl"}
        -> {"ok": true, "sentinel": ...}
    {"op": "revoke", "session": ..., "reason": ...}  -> {"ok": true, "revoked": 1}
    {"op": "status", "session": ...}                 -> {"ok": true, "status": {...}}
        (the sentinels, the cap or other refusal that ended the launch's calls, and ``usage``:
        what its calls took so far, the live meter; the answer's shape is in docs/gateway.md)

Errors: ``{"ok": false, "error": "..."}``.

``"session"`` is the launch id (the name is the wire's). ``"hold": true`` ties the launch's
sentinels to this connection: when the connection closes for any reason (the launch ended,
crashed or was SIGKILLed, so the kernel closed its socket), every still-live sentinel of the
launch is revoked. A launch holds its connection open for its whole run, so no sentinel
outlives its launch. The one client is :class:`agentc.gateway.lease.ControlConnection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentc.files.sockets import sun_path
from agentc.gateway.errors import GatewayError
from agentc.gateway.sentinels import Grant, SentinelRegistry

MAX_LINE = 64 * 1024
HELD_CLOSED = "the launch's control connection closed"


Usage = Callable[[str], dict[str, Any]]


def dispatch(
    registry: SentinelRegistry, request: Any, usage: Usage | None = None
) -> dict[str, Any]:
    if not isinstance(request, dict):
        return {"ok": False, "error": "a request is a JSON object"}
    op = request.get("op")
    try:
        if op == "issue":
            return {"ok": True, "sentinel": registry.issue(Grant.from_message(request))}
        if op == "revoke":
            reason = str(request.get("reason") or "the launch ended")
            return {"ok": True, "revoked": registry.revoke(str(request["session"]), reason)}
        if op == "status":
            status = registry.status(str(request["session"]))
            if usage is not None:  # what the launch's calls took so far (the live meter)
                status["usage"] = usage(str(request["session"]))
            return {"ok": True, "status": status}
    except KeyError as exc:
        return {"ok": False, "error": f"missing field {exc.args[0]!r}"}
    except (TypeError, ValueError):
        return {"ok": False, "error": "a field has the wrong type"}
    except GatewayError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": False, "error": f"unknown op {op!r}"}


async def serve_control(
    registry: SentinelRegistry, path: Path, usage: Usage | None = None
) -> asyncio.Server:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held: set[str] = set()  # launch ids
        try:
            while line := await reader.readline():
                try:
                    request = json.loads(line)
                except json.JSONDecodeError:
                    answer: dict[str, Any] = {"ok": False, "error": "not JSON"}
                else:
                    answer = dispatch(registry, request, usage)
                    if answer.get("ok") and request.get("op") == "issue" and request.get("hold"):
                        held.add(str(request["session"]))
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, ValueError):
            pass
        finally:
            for launch_id in held:
                registry.revoke(launch_id, HELD_CLOSED)
            writer.close()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is born 0600
    try:
        with sun_path(str(path)) as short:  # a long path: bound through its directory
            sock.bind(short)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old)
    return await asyncio.start_unix_server(client, sock=sock, limit=MAX_LINE)
