"""What one launch may take of the gateway every launch shares: body size and calls in flight.

A request body is read into memory (it is forwarded whole and, if the answer's final usage never
comes, its ``max_tokens`` is the estimate), so its size is bounded twice: the declared
``content-length`` before a byte is read, and the bytes actually received while reading (a
chunked body declares nothing). Calls in flight are counted per launch from admission until the
call is settled, including the time spent draining an answer whose client left early.
"""

from __future__ import annotations

from collections import Counter

from starlette.requests import ClientDisconnect, Request

from agentc.core.body import read_body


def declared_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    return int(value) if value is not None and value.isdigit() else None


async def read_request_body(request: Request, limit: int) -> bytes:
    """The whole body (:func:`agentc.core.body.read_body`), or :class:`BodyTooLarge` as soon
    as it is known to exceed ``limit``; :class:`ClientDisconnect` when the client leaves."""
    body = await read_body(request.receive, limit, declared_length(request))
    if body is None:
        raise ClientDisconnect
    return body


class LaunchSlots:
    """Calls in flight per launch (one event loop: no lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._busy: Counter[str] = Counter()

    def acquire(self, launch_id: str) -> bool:
        if self._busy[launch_id] >= self.limit:
            return False
        self._busy[launch_id] += 1
        return True

    def release(self, launch_id: str) -> None:
        self._busy[launch_id] -= 1
        if self._busy[launch_id] <= 0:
            del self._busy[launch_id]

    def in_flight(self, launch_id: str) -> int:
        return self._busy.get(launch_id, 0)
