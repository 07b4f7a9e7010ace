"""The forwarding ASGI app: sentinel in, real credential out, usage metered, caps enforced.

For each request: check the sentinel (``x-api-key`` or ``Authorization: Bearer``) against the
registry; refuse when a cap is reached; swap the sentinel for the upstream's real credential;
forward to the upstream and stream its answer back byte for byte while a meter reads the
usage fields; then append a ledger row and one JSON log line. A 429's reset headers mark the
vendor exhausted in vendors.json. Refusals use the API's own error shape, so a harness ends
its turn cleanly instead of retrying.
"""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentc.core.rules import rfc3339
from agentc.files import JsonLines
from agentc.supervisor.gateway.config import GatewayConfig
from agentc.supervisor.gateway.credentials import CredentialStore
from agentc.supervisor.gateway.errors import CredentialError, SentinelRefused
from agentc.supervisor.gateway.ledger import Ledger
from agentc.supervisor.gateway.meter import Api, Meter
from agentc.supervisor.gateway.prices import Cost, Tokens, price_call
from agentc.supervisor.gateway.sentinels import Grant, SentinelRegistry
from agentc.supervisor.gateway.vendors import VendorState, reset_from_headers

# httpcore tries `import sniffio` each time it makes a lock; when sniffio is not installed
# every try walks sys.path (stat calls, ~0.7 ms per forwarded call). Remember the miss once.
if importlib.util.find_spec("sniffio") is None:
    sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]

# Never forwarded upstream: hop-by-hop headers, the sentinel, and the client's encodings
# (the gateway asks for identity so the meter reads plain SSE; the client accepts identity).
_DROP_REQUEST = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "x-api-key",
        "authorization",
        "accept-encoding",
    }
)
_DROP_RESPONSE = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection"})
_METERED = frozenset({"/v1/messages", "/v1/responses"})
OAUTH_BETA = "oauth-2025-04-20"


def sentinel_of(headers: Any) -> str | None:
    key = headers.get("x-api-key")
    if key:
        return str(key).strip()
    auth = headers.get("authorization")
    if auth and str(auth).lower().startswith("bearer "):
        return str(auth)[7:].strip()
    return None


def error_response(api: Api, status: int, kind: str, message: str) -> JSONResponse:
    if api == "openai":
        body: dict[str, Any] = {
            "error": {"type": kind, "message": message, "param": None, "code": kind}
        }
    else:
        body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status)


@dataclass
class _Call:
    """What one call's log line and ledger row are made of."""

    grant: Grant | None
    method: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    ttfb: float | None = None
    status: int = 0
    outcome: str = "ok"
    reason: str | None = None
    cap: str | None = None


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        *,
        registry: SentinelRegistry | None = None,
        clock: Callable[[], float] = time.time,
        log: TextIO | None = None,
    ) -> None:
        self.config = config
        self.registry = registry or SentinelRegistry()
        self.ledger = Ledger(config.ledger, clock=clock)
        self.vendors = VendorState(config.vendors)
        self.credentials = CredentialStore()
        self.prices = config.price_table()
        self.caps = config.cap_limits()
        self._clock = clock
        self._log = JsonLines(log if log is not None else sys.stderr)
        self._client: httpx.AsyncClient | None = None
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
        self.app = Starlette(routes=[Route("/{path:path}", self.handle, methods=methods)])

    def client(self) -> httpx.AsyncClient:
        # Created on first use, inside the serving event loop.
        if self._client is None:
            # TCP_NODELAY: headers and body go out as separate writes; with Nagle the body
            # waits for a delayed ACK (~40 ms on loopback) before the upstream sees it.
            nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            limits = httpx.Limits(max_connections=512, max_keepalive_connections=128)
            self._client = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(limits=limits, socket_options=nodelay),
                timeout=httpx.Timeout(self.config.upstream_timeout_s, connect=15.0),
                follow_redirects=False,
                trust_env=False,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # ------------------------------------------------------------ the call

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        call = _Call(None, request.method, path)
        guess: Api = "openai" if path.endswith("/responses") else "anthropic"
        try:
            grant = self.registry.check(sentinel_of(request.headers))
        except SentinelRefused as exc:
            call.status, call.outcome, call.reason = 401, "refused_sentinel", exc.reason
            self._emit(call, None, None)
            return error_response(guess, 401, "authentication_error", f"agentc: {exc}")
        call.grant = grant
        upstream = self.config.upstreams.get(grant.upstream)
        if upstream is None:
            call.status, call.outcome = 502, "no_upstream"
            self._emit(call, None, None)
            return error_response(guess, 502, "api_error", "agentc: no such upstream")
        api: Api = upstream.api
        over = self.ledger.over_cap(grant, self.caps)
        if over is not None:
            name, spent, limit = over
            call.status, call.outcome, call.cap = 402, "refused_cap", name
            call.reason = f"{name} cap reached: {_usd(spent)} of {_usd(limit)}"
            self.registry.note_cap(grant.launch_id, name)
            self._emit(call, None, None, ledger=True)
            # 402 billing_error: the provider's own "no spending allowed" answer; harnesses do
            # not retry it (a 400 makes Claude Code try again several times, a 403 reads as
            # an authentication failure) and end the turn with this message.
            message = f"agentc: the {name} cost cap is reached ({call.reason})"
            return error_response(api, 402, "billing_error", message)
        try:
            credential = self.credentials.get(upstream.credential_file)
        except CredentialError as exc:
            call.status, call.outcome, call.reason = 502, "credential_error", str(exc)
            self._emit(call, None, None)
            return error_response(api, 502, "api_error", "agentc: the gateway has no credential")
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST]
        auth = credential.headers(api)
        if api == "anthropic" and credential.kind == "oauth":
            betas = [v for k, v in headers if k.lower() == "anthropic-beta"]
            headers = [(k, v) for k, v in headers if k.lower() != "anthropic-beta"]
            auth["anthropic-beta"] = ",".join([*betas, OAUTH_BETA])
        headers += list(auth.items())
        headers.append(("accept-encoding", "identity"))
        url = upstream.base_url.rstrip("/") + path
        if request.url.query:
            url += "?" + request.url.query
        body = await request.body()
        client = self.client()
        upstream_request = client.build_request(request.method, url, headers=headers, content=body)
        try:
            answer = await client.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            call.status, call.outcome, call.reason = 502, "upstream_unreachable", type(exc).__name__
            self._emit(call, None, None)
            return error_response(api, 502, "api_error", "agentc: the provider is unreachable")
        call.status = answer.status_code
        if answer.status_code == 429:
            self._exhausted(grant, answer.headers, call)
        meter: Meter | None = None
        if request.method == "POST" and path in _METERED and answer.status_code < 400:
            streamed = answer.headers.get("content-type", "").startswith("text/event-stream")
            meter = Meter(api, streamed=streamed)
        out_headers = [
            (k, v) for k, v in answer.headers.multi_items() if k.lower() not in _DROP_RESPONSE
        ]
        response = StreamingResponse(self._relay(answer, meter, call), answer.status_code)
        # Replace Starlette's defaults with the provider's headers, unchanged and in order.
        response.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in out_headers]
        return response

    async def _relay(
        self, answer: httpx.Response, meter: Meter | None, call: _Call
    ) -> AsyncIterator[bytes]:
        try:
            async for chunk in answer.aiter_raw():
                if call.ttfb is None:
                    call.ttfb = time.perf_counter()
                if meter is not None:
                    meter.feed(chunk)
                yield chunk
        except httpx.HTTPError as exc:
            call.outcome, call.reason = "upstream_broken", type(exc).__name__
        except BaseException:
            call.outcome = "client_closed"
            raise
        finally:
            # Settle even when the client went away mid-stream: what was metered is spent.
            tokens = meter.finish() if meter is not None else None
            self._emit(call, tokens, meter.model if meter else None, ledger=tokens is not None)
            await answer.aclose()

    def _exhausted(self, grant: Grant, headers: httpx.Headers, call: _Call) -> None:
        now_ms = int(self._clock() * 1000)
        until = reset_from_headers(headers, now_ms)
        if until is None:
            until = now_ms + self.config.exhausted_minutes * 60_000
            call.reason = "429 without a reset header"
        until = self.vendors.mark_exhausted(grant.upstream, until)
        call.outcome = "rate_limited"
        call.reason = (call.reason or "") + f" exhausted until {rfc3339(until)}"

    # ------------------------------------------------------------ records

    def _emit(
        self, call: _Call, tokens: Tokens | None, model: str | None, *, ledger: bool = False
    ) -> None:
        """Write the call's log line and, with ``ledger``, its ledger row."""
        now_ms = int(self._clock() * 1000)
        cost = price_call(model, tokens, self.prices) if tokens is not None else None
        if ledger and call.grant is not None:
            self.ledger.append(_ledger_row(call, call.grant, tokens, model, cost, now_ms))
        self._log.write(_log_line(call, tokens, model, cost, now_ms))


def _grant_fields(grant: Grant | None) -> dict[str, Any]:
    """The launch a record is about (all null for a call refused before its grant was known)."""
    return {
        "session": grant.launch_id if grant else None,
        "attempt": grant.attempt if grant else None,
        "generation": grant.generation if grant else None,
        "role": grant.role_slug if grant else None,
        "task": grant.task if grant else None,
        "upstream": grant.upstream if grant else None,
        "agentns_session_id": grant.agentns_session_id if grant else None,
        "agentns_mode": grant.agentns_mode if grant else None,
    }


def _usd_of(cost: Cost | None) -> float | None:
    return round(cost.usd, 6) if cost and cost.usd is not None else None


def _log_line(
    call: _Call, tokens: Tokens | None, model: str | None, cost: Cost | None, now_ms: int
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "at": rfc3339(now_ms),
        "event": "model_call",
        **_grant_fields(call.grant),
        "method": call.method,
        "path": call.path,
        "model": model,
        "status": call.status,
        "outcome": call.outcome,
        "input_tokens": tokens.input if tokens else None,
        "cache_write_tokens": tokens.cache_write if tokens else None,
        "cache_read_tokens": tokens.cache_read if tokens else None,
        "output_tokens": tokens.output if tokens else None,
        "usd": _usd_of(cost),
        "ms": round((time.perf_counter() - call.started) * 1000, 2),
        "ttfb_ms": round((call.ttfb - call.started) * 1000, 2) if call.ttfb else None,
    }
    if call.cap:
        line["cap"] = call.cap
    if call.reason:
        line["reason"] = call.reason.strip()
    return line


def _ledger_row(
    call: _Call,
    grant: Grant,
    tokens: Tokens | None,
    model: str | None,
    cost: Cost | None,
    now_ms: int,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "at_ms": now_ms,
        **_grant_fields(grant),
        "project": grant.project,
        "model": model,
        "input_tokens": tokens.input if tokens else 0,
        "cache_write_tokens": tokens.cache_write if tokens else 0,
        "cache_read_tokens": tokens.cache_read if tokens else 0,
        "output_tokens": tokens.output if tokens else 0,
        "usd": _usd_of(cost) if tokens else 0.0,
        "usd_for_caps": round(cost.usd_for_caps, 6) if cost else 0.0,
        "status": call.status,
    }
    if cost and cost.priced_model and cost.priced_model != model:
        row["priced_model"] = cost.priced_model
    if cost and cost.unpriced_reason:
        row["usd_unpriced_reason"] = cost.unpriced_reason
    if call.cap:
        row["refused_cap"] = call.cap
        row["reason"] = call.reason
    return row


def _usd(value: float) -> str:
    return f"${value:.2f}" if value >= 1 else f"${value:.4g}"
