"""The host-side control API: the supervisor issues and revokes sentinels over a Unix socket.

The socket is created mode 0600 in a directory the launches cannot reach (never relayed into a
launch). Protocol: one JSON object per line in, one per line out.

    {"op": "issue", "session": ..., "attempt": ..., "generation": 3, "upstream": "claude",
     "role": "impl", "task": ..., "project": ..., "launch_usd": 5.0, "hold": true,
     "agentns_session_id": ..., "agentns_mode": "prctl"}
        -> {"ok": true, "sentinel": ...}
    {"op": "revoke", "session": ..., "reason": ...}  -> {"ok": true, "revoked": 1}
    {"op": "status", "session": ...}                 -> {"ok": true, "status": {...}}

Errors: ``{"ok": false, "error": "..."}``.

``"hold": true`` ties the session's sentinels to this connection: when the connection closes
for any reason (the launch ended, crashed or was SIGKILLed, so the kernel closed its socket),
every still-live sentinel of the session is revoked. A launch holds its connection open for
its whole run (``agentc.supervisor.gateway.lease``), so no sentinel outlives its launch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from agentc.supervisor.gateway.errors import GatewayError
from agentc.supervisor.gateway.sentinels import Grant, SentinelRegistry

MAX_LINE = 64 * 1024
HELD_CLOSED = "the launch's control connection closed"


def _optional(request: dict[str, Any], key: str) -> str | None:
    value = request.get(key)
    return str(value) if value else None


def dispatch(registry: SentinelRegistry, request: Any) -> dict[str, Any]:
    if not isinstance(request, dict):
        return {"ok": False, "error": "a request is a JSON object"}
    op = request.get("op")
    try:
        if op == "issue":
            launch_usd = request.get("launch_usd")
            grant = Grant(
                session=str(request["session"]),
                attempt=str(request["attempt"]),
                generation=int(request["generation"]),
                upstream=str(request["upstream"]),
                role=str(request.get("role") or "impl"),
                task=str(request["task"]) if request.get("task") else None,
                project=str(request["project"]) if request.get("project") else None,
                launch_usd=float(launch_usd) if launch_usd is not None else None,
                agentns_session_id=_optional(request, "agentns_session_id"),
                agentns_mode=_optional(request, "agentns_mode"),
            )
            return {"ok": True, "sentinel": registry.issue(grant)}
        if op == "revoke":
            reason = str(request.get("reason") or "the launch ended")
            return {"ok": True, "revoked": registry.revoke(str(request["session"]), reason)}
        if op == "status":
            return {"ok": True, "status": registry.status(str(request["session"]))}
    except KeyError as exc:
        return {"ok": False, "error": f"missing field {exc.args[0]!r}"}
    except (TypeError, ValueError):
        return {"ok": False, "error": "a field has the wrong type"}
    except GatewayError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": False, "error": f"unknown op {op!r}"}


async def serve_control(registry: SentinelRegistry, path: Path) -> asyncio.Server:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held: set[str] = set()
        try:
            while line := await reader.readline():
                try:
                    request = json.loads(line)
                except json.JSONDecodeError:
                    answer: dict[str, Any] = {"ok": False, "error": "not JSON"}
                else:
                    answer = dispatch(registry, request)
                    if answer.get("ok") and request.get("op") == "issue" and request.get("hold"):
                        held.add(str(request["session"]))
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, ValueError):
            pass
        finally:
            for session in held:
                registry.revoke(session, HELD_CLOSED)
            writer.close()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    old = os.umask(0o177)  # the socket is born 0600
    try:
        server = await asyncio.start_unix_server(client, path=str(path), limit=MAX_LINE)
    finally:
        os.umask(old)
    return server


class ControlClient:
    """A blocking client for the supervisor's side."""

    def __init__(self, path: Path, *, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout

    def request(self, obj: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(self.timeout)
            try:
                sock.connect(str(self.path))
            except OSError as exc:
                raise GatewayError(f"{self.path}: gateway control socket: {exc.strerror}") from None
            sock.sendall(json.dumps(obj).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        answer = json.loads(data)
        if not isinstance(answer, dict):
            raise GatewayError("gateway control: malformed answer")
        if not answer.get("ok"):
            raise GatewayError(f"gateway control: {answer.get('error')}")
        return answer

    def issue(self, **fields: Any) -> str:
        return str(self.request({"op": "issue", **fields})["sentinel"])

    def revoke(self, session: str, reason: str = "the launch ended") -> int:
        return int(self.request({"op": "revoke", "session": session, "reason": reason})["revoked"])

    def status(self, session: str) -> dict[str, Any]:
        status = self.request({"op": "status", "session": session})["status"]
        assert isinstance(status, dict)
        return status
