"""Usage from the provider's own answer, read while the bytes stream past (a tee, no buffering).

Anthropic Messages: ``message_start.message.usage`` gives input, cache write and cache read;
``message_delta.usage`` the final output count (and, on newer APIs, repeats the input counts,
which then win). OpenAI Responses: ``response.completed`` (or ``.incomplete``/``.failed``)
carries ``response.usage`` where ``input_tokens`` includes cached tokens; fresh input is
``input_tokens - cached_tokens - cache_write_tokens``. Non-streamed JSON answers carry
``usage`` at the top level.

``final`` tells whether the answer's last usage figures were seen (Anthropic's ``message_delta``,
OpenAI's terminal ``response.*`` event, a JSON body's ``usage``); without them the output count
is unknown and :func:`estimate` gives what to charge instead.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from agentc.gateway.prices import Tokens

Api = Literal["anthropic", "openai"]
# A streamed answer that calls a tool: the event that opens a tool call, naming its kind.
_TOOL_START = {"anthropic": b"content_block_start", "openai": b"output_item.added"}
_TOOL_KINDS = (b'"tool_use"', b'"function_call"', b'"custom_tool_call"')
MAX_JSON_BODY = 16 * 1024 * 1024
MAX_EVENT = 4 * 1024 * 1024


def _int(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


class Meter:
    def __init__(self, api: Api, *, streamed: bool) -> None:
        self.api = api
        self.streamed = streamed
        self.model: str | None = None
        self._anthropic: dict[str, int] = {}
        self._openai: dict[str, Any] | None = None
        self._buf = bytearray()
        self._overflow = False
        self.seen_usage = False
        self.final = False
        self.used_tools = False  # the answer calls a tool (the no-progress breaker reads it)

    def feed(self, chunk: bytes) -> None:
        if self._overflow:
            return
        self._buf += chunk
        if not self.streamed:
            if len(self._buf) > MAX_JSON_BODY:
                self._overflow = True
                self._buf.clear()
            return
        while True:
            # SSE events end with a blank line; providers use \n, tolerate \r\n.
            idx = self._buf.find(b"\n\n")
            alt = self._buf.find(b"\r\n\r\n")
            if idx < 0 and alt < 0:
                if len(self._buf) > MAX_EVENT:
                    self._buf.clear()
                return
            if idx < 0 or (0 <= alt < idx):
                event, self._buf = bytes(self._buf[:alt]), self._buf[alt + 4 :]
            else:
                event, self._buf = bytes(self._buf[:idx]), self._buf[idx + 2 :]
            # Cheap filters first: only events that can carry usage or the model are decoded.
            if b"usage" in event or b"message_start" in event:
                self._event(event)
            if not self.used_tools and _TOOL_START[self.api] in event:
                self.used_tools = any(kind in event for kind in _TOOL_KINDS)

    def _event(self, event: bytes) -> None:
        data = b"\n".join(
            line[5:].lstrip()
            for line in event.replace(b"\r\n", b"\n").split(b"\n")
            if line.startswith(b"data:")
        )
        try:
            obj = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return
        if not isinstance(obj, dict):
            return
        kind = obj.get("type")
        if self.api == "anthropic":
            if kind == "message_start" and isinstance(obj.get("message"), dict):
                message = obj["message"]
                if isinstance(message.get("model"), str):
                    self.model = message["model"]
                self._take_anthropic(message.get("usage"))
            elif kind == "message_delta":
                self._take_anthropic(obj.get("usage"))
                self.final = self.final or isinstance(obj.get("usage"), dict)
        elif isinstance(kind, str) and kind in (
            "response.completed",
            "response.incomplete",
            "response.failed",
        ):
            response = obj.get("response")
            if isinstance(response, dict):
                self._take_openai(response)

    def _take_anthropic(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        for key in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        ):
            if key in usage and usage[key] is not None:
                self._anthropic[key] = _int(usage[key])
                self.seen_usage = True

    def _take_openai(self, response: dict[str, Any]) -> None:
        if isinstance(response.get("model"), str):
            self.model = response["model"]
        if isinstance(response.get("usage"), dict):
            self._openai = response["usage"]
            self.seen_usage = self.final = True

    def finish(self) -> Tokens | None:
        """The call's tokens, or None when the answer carried no usage."""
        if not self.streamed and self._buf and not self._overflow:
            self.used_tools = any(kind in self._buf for kind in _TOOL_KINDS)
            try:
                obj = json.loads(bytes(self._buf))
            except (json.JSONDecodeError, UnicodeDecodeError):
                obj = None
            self._buf.clear()
            if isinstance(obj, dict):
                if self.api == "anthropic":
                    if isinstance(obj.get("model"), str):
                        self.model = obj["model"]
                    self._take_anthropic(obj.get("usage"))
                    self.final = isinstance(obj.get("usage"), dict)
                else:
                    self._take_openai(obj)
        if not self.seen_usage:
            return None
        if self.api == "anthropic":
            u = self._anthropic
            return Tokens(
                input=u.get("input_tokens", 0),
                cache_write=u.get("cache_creation_input_tokens", 0),
                cache_read=u.get("cache_read_input_tokens", 0),
                output=u.get("output_tokens", 0),
            )
        usage = self._openai or {}
        details = usage.get("input_tokens_details")
        details = details if isinstance(details, dict) else {}
        cached = _int(details.get("cached_tokens"))
        written = _int(details.get("cache_write_tokens"))
        total = _int(usage.get("input_tokens"))
        return Tokens(
            input=max(0, total - cached - written),
            cache_write=written,
            cache_read=cached,
            output=_int(usage.get("output_tokens")),
        )


# An estimated input count when the answer never said (OpenAI's usage comes only at the end):
# one token per 3 bytes of the request body, above what prompts usually take, so an estimate
# does not slip under a cap.
BODY_BYTES_PER_TOKEN = 3


def estimate(
    api: Api, seen: Tokens | None, body: bytes, most_output: int
) -> tuple[Tokens, str | None]:
    """What to charge for a call whose final usage never came, and the model the request named.

    Output: the request's own limit (``max_tokens``; ``max_output_tokens`` for OpenAI), at most
    ``most_output``, which is also the figure when the request names none. Input: the counts
    the answer already gave (Anthropic's ``message_start``), else estimated from the body size.
    """
    try:
        request = json.loads(body) if body else None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        request = None
    request = request if isinstance(request, dict) else {}
    model = request.get("model")
    asked = request.get("max_tokens" if api == "anthropic" else "max_output_tokens")
    output = most_output
    if isinstance(asked, int) and not isinstance(asked, bool) and 1 <= asked <= most_output:
        output = asked
    if seen is not None and (seen.input or seen.cache_write or seen.cache_read):
        tokens = Tokens(seen.input, seen.cache_write, seen.cache_read, max(output, seen.output))
    else:
        tokens = Tokens(max(1, len(body) // BODY_BYTES_PER_TOKEN), 0, 0, output)
    return tokens, model if isinstance(model, str) else None
