"""The one reader of an HTTP request body with a size limit (the service's and the gateway's).

It reads ASGI ``http.request`` messages until the body ends. The limit is checked twice: against
the declared ``content-length`` before a byte is read, and against the bytes received while
reading (a chunked body declares nothing), so a body is refused as soon as it is known to be too
long and never held whole beyond the limit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from agentc.core.errors import AgentcError

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class BodyTooLarge(AgentcError):
    """The body declares or sends more than the limit the reader was given."""

    def __init__(self, limit: int, declared: bool) -> None:
        how = "declares" if declared else "sent"
        super().__init__(f"the request body {how} more than {limit} bytes")
        self.limit = limit


async def read_body(
    receive: Receive, limit: int | None = None, declared: int | None = None
) -> bytes | None:
    """The whole body; None when the client leaves before it ends. With ``limit``, raises
    :class:`BodyTooLarge` once ``declared`` (the content-length) or the body is longer."""
    if limit is not None and declared is not None and declared > limit:
        raise BodyTooLarge(limit, declared=True)
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk: bytes = message.get("body", b"")
        seen += len(chunk)
        if limit is not None and seen > limit:
            raise BodyTooLarge(limit, declared=False)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
