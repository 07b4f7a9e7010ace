"""A scripted model provider: the Anthropic Messages and OpenAI Responses APIs, offline.

The real harness binaries (Claude Code, Codex, Pi) accept a base URL; pointed here they get
answers from a script (agentc.testing.script) instead of a model. Every request is recorded for
assertions. From tests::

    with ScriptedProvider(parse_script({...})) as provider:
        run_harness(base_url=provider.url)
        assert provider.main_requests()[1].body["messages"][-1]...

From the command line: ``python -m agentc.testing.provider --script FILE --port N``.

Besides the two model calls it answers ``POST /v1/messages/count_tokens`` (``input_tokens``
estimated from the body's size) and ``GET /v1/models`` / ``/v1/models/{id}`` (the Anthropic shape
when the request carries ``anthropic-version``, else the OpenAI list); neither plays the script.

Which requests play the script: "main" requests are those that declare tools (the agent's
conversation). Side requests without tools (Claude Code's title or quota probes) get the
script's ``side`` turn, and requests after the last turn get its ``after`` turn; all are
recorded, so tests assert on ``main_requests()``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import click
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentc.core.errors import ConfigError
from agentc.testing import wire
from agentc.testing.script import Failure, Script, Turn, Usage, load_script
from agentc.testing.serving import ServerThread

Api = Literal["anthropic", "openai", "other"]
DEFAULT_MODELS = ("claude-sonnet-5", "claude-haiku-4-5", "gpt-5")


@dataclass
class RecordedRequest:
    """One request the provider got, and what it answered."""

    api: Api
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    main: bool
    turn: int | None
    stream: bool
    status: int = 0
    answered_headers: dict[str, str] = field(default_factory=dict)
    reported: Usage | None = None
    finished: threading.Event = field(default_factory=threading.Event)

    def summary(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "path": self.path,
            "main": self.main,
            "turn": self.turn,
            "status": self.status,
            "reported": self.reported.model_dump() if self.reported else None,
        }


class ScriptedProvider:
    """The provider: a Starlette app plus a background uvicorn thread for tests."""

    def __init__(self, script: Script, *, record_path: Path | None = None) -> None:
        self.script = script
        self.turns = script.expanded()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._next_turn = 0
        self._ids = itertools.count(1)
        self._gates: dict[str, threading.Event] = {}
        self._paused: dict[str, threading.Event] = {}
        self._stopping = threading.Event()
        self._record_path = record_path
        self._thread: ServerThread | None = None
        self.url = ""
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/models/{model_id}", self._models, methods=["GET"]),
                Route("/{path:path}", self._other, methods=["GET", "POST", "HEAD"]),
            ]
        )

    # ------------------------------------------------------------ test helpers

    def gate(self, name: str) -> threading.Event:
        """The event a ``pause`` with this gate waits for; ``set()`` it to let the stream go on."""
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def paused(self, name: str) -> threading.Event:
        """Set once a stream has stopped at the pause with this gate."""
        with self._lock:
            return self._paused.setdefault(name, threading.Event())

    def main_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.main]

    def tool_results(self) -> list[str]:
        """The text of every tool result a harness sent back (Anthropic's ``tool_result``
        blocks in the main requests' messages), in order; repeated with each later turn."""
        found: list[str] = []
        for request in self.main_requests():
            body = request.body if isinstance(request.body, dict) else {}
            for message in body.get("messages", []):
                content = message.get("content") if isinstance(message, dict) else None
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        inner = block.get("content")
                        parts = inner if isinstance(inner, list) else [{"text": inner}]
                        found += [str(p.get("text", "")) for p in parts if isinstance(p, dict)]
        return found

    def reported_total(self) -> Usage:
        """Sum of the usage figures the provider reported, over every answered request."""
        with self._lock:
            reported = [r.reported for r in self.requests if r.reported is not None]
        return Usage(
            input_tokens=sum(u.input_tokens for u in reported),
            output_tokens=sum(u.output_tokens for u in reported),
            cache_creation_input_tokens=sum(u.cache_creation_input_tokens for u in reported),
            cache_read_input_tokens=sum(u.cache_read_input_tokens for u in reported),
        )

    # ------------------------------------------------------------ lifecycle

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve in a background thread; returns the base URL (no trailing slash)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Like a real API server: no Nagle delay on the last small chunk of a stream.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        bound_port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2
        )
        server = uvicorn.Server(config)
        self._thread = ServerThread(
            server, lambda: server.serve(sockets=[sock]), what="scripted provider"
        )
        self._thread.start()
        self.url = f"http://{host}:{bound_port}"
        return self.url

    def __enter__(self) -> ScriptedProvider:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        for gate in list(self._gates.values()):
            gate.set()
        if self._thread is not None:
            self._thread.stop()

    # ------------------------------------------------------------ request handling

    async def _record(
        self, request: Request, api: Api, *, scripted: bool = True
    ) -> RecordedRequest:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = raw.decode("latin-1")
        has_tools = isinstance(body, dict) and bool(body.get("tools"))
        main = scripted and api != "other" and has_tools
        with self._lock:
            turn: int | None = None
            if main:
                turn = self._next_turn
                self._next_turn += 1
            rec = RecordedRequest(
                api=api,
                method=request.method,
                path=request.url.path,
                query=request.url.query,
                headers={k.lower(): v for k, v in request.headers.items()},
                body=body,
                main=main,
                turn=turn,
                stream=isinstance(body, dict) and bool(body.get("stream")),
            )
            self.requests.append(rec)
        return rec

    def _turn_for(self, rec: RecordedRequest) -> Turn:
        if not rec.main:
            return self.script.side
        assert rec.turn is not None
        return self.turns[rec.turn] if rec.turn < len(self.turns) else self.script.after

    def _log(self, rec: RecordedRequest) -> None:
        if self._record_path is None:
            return
        line = dict(rec.summary(), headers=rec.headers, body=rec.body)
        with self._lock, self._record_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    async def _messages(self, request: Request) -> Response:
        return await self._answer(request, "anthropic")

    async def _responses(self, request: Request) -> Response:
        return await self._answer(request, "openai")

    async def _other(self, request: Request) -> Response:
        rec = await self._record(request, "other")
        return self._done(
            rec, JSONResponse(wire.anthropic_error("not_found_error", "not scripted"), 404)
        )

    async def _count_tokens(self, request: Request) -> Response:
        rec = await self._record(request, "anthropic", scripted=False)
        size = len(json.dumps(rec.body)) if rec.body is not None else 0
        return self._done(rec, JSONResponse({"input_tokens": max(1, size // 4)}))

    def models(self) -> list[str]:
        """The model ids ``GET /v1/models`` lists: the script's own, then the default ones."""
        named = [t.model for t in [*self.turns, self.script.side, self.script.after] if t.model]
        return list(dict.fromkeys([*named, *DEFAULT_MODELS]))

    async def _models(self, request: Request) -> Response:
        anthropic = "anthropic-version" in request.headers
        rec = await self._record(request, "anthropic" if anthropic else "openai", scripted=False)
        models = self.models()
        one = request.path_params.get("model_id")
        if one is not None and one not in models:
            message = f"model: {one}"
            err = (
                wire.anthropic_error("not_found_error", message)
                if anthropic
                else wire.openai_error("invalid_request_error", message, code="model_not_found")
            )
            return self._done(rec, JSONResponse(err, 404))
        if one is not None:
            body = wire.anthropic_model(one) if anthropic else wire.openai_model(one)
        else:
            body = wire.anthropic_models(models) if anthropic else wire.openai_models(models)
        return self._done(rec, JSONResponse(body))

    def _done(self, rec: RecordedRequest, response: Response) -> Response:
        rec.status = response.status_code
        rec.finished.set()
        self._log(rec)
        return response

    async def _answer(self, request: Request, api: Api) -> Response:
        rec = await self._record(request, api)
        turn = self._turn_for(rec)
        body: dict[str, Any] = rec.body if isinstance(rec.body, dict) else {}
        model = turn.model or str(body.get("model") or "scripted-model")
        if turn.failure is not None:
            response = await self._fail(rec, api, turn.failure)
            rec.status = response.status_code
            rec.answered_headers = dict(response.headers)
            if not isinstance(response, StreamingResponse):
                rec.finished.set()
            self._log(rec)
            return response
        names = wire.tool_names(body)
        n = next(self._ids)
        ids = [f"{n}_{i}" for i in range(len(turn.tool_calls) + 1)]
        rec.status = 200
        rec.reported = turn.usage
        self._log(rec)
        if api == "anthropic":
            blocks = wire.anthropic_blocks(turn, names, (f"toolu_{i}" for i in ids))
            if not rec.stream:
                rec.finished.set()
                return JSONResponse(wire.anthropic_message(turn, model, f"msg_{n}", blocks))
            events = wire.anthropic_events(turn, model, f"msg_{n}", blocks)
        else:
            items = wire.openai_items(turn, names, ids)
            if not rec.stream:
                rec.finished.set()
                return JSONResponse(
                    wire.openai_response(
                        f"resp_{n}", model, "completed", items, wire.openai_usage(turn.usage)
                    )
                )
            events = wire.openai_events(turn, model, f"resp_{n}", items)
        return StreamingResponse(
            self._stream(rec, events, turn),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )

    async def _stream(
        self, rec: RecordedRequest, events: list[wire.Event], turn: Turn
    ) -> AsyncIterator[bytes]:
        try:
            for index, (name, data) in enumerate(events):
                yield wire.sse_bytes(name, data)
                if turn.pause is not None and index + 1 == turn.pause.after_events:
                    await self._pause(turn.pause.gate, turn.pause.seconds)
        finally:
            rec.finished.set()

    async def _pause(self, gate: str | None, seconds: float) -> None:
        # Why poll: the gate is a threading.Event set from the test's thread.
        event = self.gate(gate) if gate else None
        if gate:
            self.paused(gate).set()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self._stopping.is_set():
            if event is not None and event.is_set():
                return
            await asyncio.sleep(0.005)

    async def _fail(self, rec: RecordedRequest, api: Api, failure: Failure) -> Response:
        now = int(time.time())
        reset = failure.reset_at if failure.reset_at is not None else now + failure.retry_after_s
        wait = max(0, reset - now)
        if failure.kind == "rate_limit":
            message = failure.message or "Number of requests has exceeded your rate limit."
            if api == "openai":
                headers = {
                    "retry-after": str(wait),
                    "x-ratelimit-reset-requests": f"{wait}s",
                    "x-ratelimit-remaining-requests": "0",
                }
                err = wire.openai_error("requests", message, code="rate_limit_exceeded")
            else:
                headers = {
                    "retry-after": str(wait),
                    "anthropic-ratelimit-requests-remaining": "0",
                    "anthropic-ratelimit-requests-reset": _rfc3339(reset),
                    "anthropic-ratelimit-unified-status": "rejected",
                    "anthropic-ratelimit-unified-reset": str(reset),
                }
                err = wire.anthropic_error("rate_limit_error", message)
            return JSONResponse(err, failure.status or 429, headers=headers)
        if failure.kind == "usage_limit":
            if api == "openai":
                message = failure.message or "You've hit your usage limit."
                err = wire.openai_error(
                    "usage_limit_reached", message, code="usage_limit_reached", resets_at=reset
                )
            else:
                message = failure.message or f"Claude AI usage limit reached|{reset}"
                err = wire.anthropic_error("rate_limit_error", message)
            return JSONResponse(err, failure.status or 429, headers={"retry-after": str(wait)})
        if failure.kind == "server_error":
            message = failure.message or "Internal server error"
            if api == "openai":
                err = wire.openai_error("server_error", message)
            else:
                err = wire.anthropic_error("api_error", message)
            return JSONResponse(err, failure.status or 500)
        if failure.kind == "hang":
            await self._pause(None, failure.seconds)
            err = wire.anthropic_error("timeout_error", "scripted hang ended")
            return JSONResponse(err, 504)
        return StreamingResponse(self._malformed(rec, api), media_type="text/event-stream")

    async def _malformed(self, rec: RecordedRequest, api: Api) -> AsyncIterator[bytes]:
        try:
            if api == "openai":
                yield wire.sse_bytes("response.created", {"type": "response.created"})
                yield b'event: response.output_item.added\ndata: {"type": "response.out\n\n'
            else:
                yield wire.sse_bytes("message_start", {"type": "message_start"})
                yield b'event: content_block_delta\ndata: {"type": "content_block_de\n\n'
        finally:
            rec.finished.set()


def _rfc3339(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@click.command()
@click.option("--script", "script_path", type=click.Path(path_type=Path), required=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=0, show_default=True)
@click.option("--record", "record_path", type=click.Path(path_type=Path), default=None)
def main(script_path: Path, host: str, port: int, record_path: Path | None) -> None:
    """Serve a scripted model provider until interrupted; prints its base URL."""
    try:
        script = load_script(script_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    provider = ScriptedProvider(script, record_path=record_path)
    url = provider.start(host, port)
    click.echo(url, file=sys.stdout)
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        provider.stop()


if __name__ == "__main__":
    main()
