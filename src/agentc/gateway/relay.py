"""Streaming one answer back: the upstream is read by a task of its own, not by the client.

A *pump* task reads the provider's answer chunk by chunk, feeds the meter and hands each chunk
to the client's response through a small queue. The client leaving (a closed socket, a
cancelled response) never cancels a read of the upstream: a client that reads the text and
closes before the last event would otherwise escape the output count, which arrives in that
event. Once the client is gone the pump keeps reading, without passing anything on, until the
final usage has been seen, the answer ends, ``drain_max_bytes`` more bytes were read or
``drain_timeout_s`` passed, whichever comes first; then the call is settled (ledger row, log
line, launch slot released). Settling happens exactly once, in the pump, on every path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentc.gateway.meter import Meter
from agentc.gateway.records import Call
from agentc.gateway.upstream import Answer, UpstreamError

_QUEUE_CHUNKS = 64  # chunks waiting for a slow client before the pump waits too


@dataclass(frozen=True)
class DrainLimits:
    timeout_s: float
    max_bytes: int


class Relay:
    """One answer on its way back: :meth:`start` runs the pump, :meth:`leave` ends the client."""

    def __init__(
        self,
        answer: Answer,
        meter: Meter | None,
        call: Call,
        limits: DrainLimits,
        settle: Callable[[], None],
    ) -> None:
        self.answer = answer
        self.meter = meter
        self.call = call
        self.limits = limits
        self._settle = settle
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(_QUEUE_CHUNKS)
        self._gone = False  # the client left before the end of the answer
        self._delivered = False  # the client got the whole answer
        self._drained = 0
        self._stop: str | None = None  # why the pump was cancelled
        self._timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.get_running_loop().create_task(self._pump())
        return self.task

    # ------------------------------------------------------------ the client's side

    async def body(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._queue.get()
            if chunk is None:
                self._delivered = True
                return
            yield chunk

    def leave(self) -> None:
        """The client's response is over (finished, failed or cancelled)."""
        if self._delivered or self._gone or self.task is None or self.task.done():
            return
        self._gone = True
        if self.call.outcome == "ok":
            self.call.outcome = "client_closed"
        while not self._queue.empty():  # also wakes a pump waiting to put
            self._queue.get_nowait()
        if self.meter is None or self.meter.final:
            self.cancel(None)  # nothing more to learn from the rest of the answer
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.limits.timeout_s, self.cancel, "drain_timeout_s passed")

    def cancel(self, why: str | None) -> None:
        """Stop reading the upstream (a drain's deadline, or the gateway stopping)."""
        if self.task is not None and not self.task.done():
            self._stop = why
            self.task.cancel()

    # ------------------------------------------------------------ the upstream's side

    async def _pump(self) -> None:
        try:
            async for chunk in self.answer.chunks():
                if self.call.ttfb is None:
                    self.call.ttfb = time.perf_counter()
                if self.meter is not None:
                    self.meter.feed(chunk)
                if not self._gone:
                    await self._queue.put(chunk)
                elif self._drain_done(len(chunk)):
                    break
        except UpstreamError as exc:
            self.call.outcome, self.call.reason = "upstream_broken", exc.name
        except asyncio.CancelledError:
            if self._stop:
                self.call.note(f"stopped reading the answer: {self._stop}")
        finally:
            if self._timer is not None:
                self._timer.cancel()
            self._end()
            try:
                self._settle()
            finally:
                await self.answer.aclose()

    def _drain_done(self, size: int) -> bool:
        """After the client left: stop once the usage is final or the byte budget is spent."""
        self._drained += size
        if self.meter is None or self.meter.final:
            return True
        if self._drained > self.limits.max_bytes:
            self.call.note("stopped reading the answer: drain_max_bytes read")
            return True
        return False

    def _end(self) -> None:
        """Tell a client still there that the answer is over (truncated if it broke)."""
        if self._gone:
            return
        try:
            self._queue.put_nowait(None)
        except asyncio.QueueFull:
            while not self._queue.empty():
                self._queue.get_nowait()
            self._queue.put_nowait(None)


class RelayResponse(Response):
    """The provider's status, headers (unchanged, in order) and streamed body.

    Sent straight to the ASGI server, without Starlette's streaming machinery (an anyio task
    group and cancel scopes per response, a third of the gateway's own time per call): the
    body is sent from the serving task, and one small task waits for the client to leave, then
    cancels the sending (the pump goes on reading the upstream, see :meth:`Relay.leave`).
    """

    def __init__(self, relay: Relay, status: int, headers: list[tuple[str, str]]) -> None:
        self.status_code = status
        self.background = None
        # The provider's headers replace any default of ours.
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        self.relay = relay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sending = asyncio.current_task()
        assert sending is not None
        left = False

        async def watch() -> None:
            nonlocal left
            while (await receive())["type"] != "http.disconnect":
                pass
            left = True
            sending.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code,
                 "headers": self.raw_headers}
            )  # fmt: skip
            async for chunk in self.relay.body():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not left:
                raise
            sending.uncancel()  # the client left: the call is over for it, not cancelled
        except OSError:
            pass  # the client's connection broke mid-answer
        finally:
            watcher.cancel()
            self.relay.leave()
