"""The forwarding ASGI app: sentinel in, real credential out, usage metered, caps enforced.

For each request: check the sentinel (``x-api-key`` or ``Authorization: Bearer``) against the
registry; refuse a call the harnesses never make (:mod:`.routes`), a launch past a cap, the
model policy or a loop breaker (:mod:`.admission`), with too many calls in flight, or with a
body over the size limit (:mod:`.limits`); swap the sentinel for the upstream's real
credential; forward with the gateway's own HTTP/1.1 client (:mod:`.upstream`) and stream the
answer back byte for byte while a meter reads the usage fields (:mod:`.relay`, which keeps
reading for the final usage when the client leaves early); then append a ledger row, one JSON
log line (:mod:`.records`) and the call's event in its launch's event log. A 429's reset
headers mark the vendor exhausted in vendors.json. Refusals use the API's own error shape, so a
harness ends its turn cleanly instead of retrying. The app is plain ASGI (no router or
middleware): the allowlist is the routing.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from agentc.core.body import BodyTooLarge
from agentc.core.rules import rfc3339
from agentc.files import JsonLines
from agentc.files.launchlog import LaunchLogs, ensure_directory
from agentc.gateway.admission import Admission, Refused
from agentc.gateway.breakers import Breakers
from agentc.gateway.config import GatewayConfig, UpstreamConfig
from agentc.gateway.credentials import Credential, CredentialStore
from agentc.gateway.errors import CredentialError, GatewayError, SentinelRefused
from agentc.gateway.ledger import Ledger
from agentc.gateway.limits import LaunchSlots, read_request_body
from agentc.gateway.meter import Api, Meter, estimate
from agentc.gateway.prices import Tokens, price_call
from agentc.gateway.records import Call, launch_event, ledger_row, log_line
from agentc.gateway.relay import DrainLimits, Relay, RelayResponse
from agentc.gateway.routes import route_for
from agentc.gateway.sentinels import Grant, SentinelRegistry
from agentc.gateway.upstream import Answer, Headers, Upstream, UpstreamError
from agentc.gateway.vendors import VendorState, reset_from_headers

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
        # A method override would turn an allowed GET into something else upstream.
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    }
)
_DROP_RESPONSE = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection"})
_LOGGED_PATH = 200  # characters of a refused path kept in the log line
OAUTH_BETA = "oauth-2025-04-20"


def sentinel_of(headers: Any) -> str | None:
    key = headers.get("x-api-key")
    if key:
        return str(key).strip()
    auth = headers.get("authorization")
    if auth and str(auth).lower().startswith("bearer "):
        return str(auth)[7:].strip()
    return None


def error_response(
    api: Api, status: int, kind: str, message: str, *, headers: dict[str, str] | None = None
) -> JSONResponse:
    if api == "openai":
        body: dict[str, Any] = {
            "error": {"type": kind, "message": message, "param": None, "code": kind}
        }
    else:
        body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status, headers=headers)


def _upstream_headers(request: Request, api: Api, credential: Credential) -> list[tuple[str, str]]:
    """The client's headers without the sentinel and hop-by-hop ones, plus the real credential."""
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST]
    auth = credential.headers(api)
    if api == "anthropic" and credential.kind == "oauth":
        betas = [v for k, v in headers if k.lower() == "anthropic-beta"]
        headers = [(k, v) for k, v in headers if k.lower() != "anthropic-beta"]
        auth["anthropic-beta"] = ",".join([*betas, OAUTH_BETA])
    headers += list(auth.items())
    headers.append(("accept-encoding", "identity"))
    return headers


def _upstream_of(name: str, config: UpstreamConfig, gateway: GatewayConfig) -> Upstream:
    try:
        return Upstream(
            config.base_url, connect_timeout_s=15.0, read_timeout_s=gateway.upstream_timeout_s
        )
    except ValueError as exc:
        raise GatewayError(f"upstream {name}: base_url {exc}") from None


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
        self.slots = LaunchSlots(config.launch_concurrency)
        self.breakers = Breakers(config.breaker_limits())
        self.admission = Admission(self.registry, self.ledger, self.caps, self.breakers)
        self.drain = DrainLimits(config.drain_timeout_s, config.drain_max_bytes)
        self._relays: set[Relay] = set()
        self._clock = clock
        self._log = JsonLines(log if log is not None else sys.stderr)
        self.launch_logs: LaunchLogs | None = None
        if config.launch_logs is not None:
            self.launch_logs = LaunchLogs(ensure_directory(config.launch_logs), "gateway")
        self.upstreams = {
            name: _upstream_of(name, u, config) for name, u in config.upstreams.items()
        }
        self.app = self._asgi

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app: every request to :meth:`handle` (no router: the allowlist is the
        routing, :mod:`.routes`), its response sent straight back."""
        if scope["type"] != "http":
            return  # no lifespan, no websockets
        response = await self.handle(Request(scope, receive))
        await response(scope, receive, send)

    async def aclose(self) -> None:
        """Stop every answer still being read (each is settled), then close the client."""
        relays = list(self._relays)
        for relay in relays:
            relay.cancel("the gateway stopped")
        tasks = [r.task for r in relays if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for upstream in self.upstreams.values():
            upstream.close()
        if self.launch_logs is not None:
            self.launch_logs.close()

    # ------------------------------------------------------------ the call

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        call = Call(None, request.method, path[:_LOGGED_PATH])
        api: Api = "openai" if path.endswith("/responses") else "anthropic"
        try:
            grant = call.grant = self._check_sentinel(request)
            upstream = self._upstream(grant)
            api = upstream.api
            metered = self._check_route(api, request.method, path)
            self.admission.before(call)
            self._take_slot(grant)
        except Refused as refusal:
            return self._refuse(call, api, refusal)
        response: Response | None = None
        try:
            response = await self._forward(request, call, upstream, metered)
        except Refused as refusal:
            response = self._refuse(call, api, refusal)
        finally:
            # A relayed answer releases the slot when it is settled; anything else now.
            if not isinstance(response, RelayResponse):
                self.slots.release(grant.launch_id)
        return response

    def _check_sentinel(self, request: Request) -> Grant:
        try:
            return self.registry.check(sentinel_of(request.headers))
        except SentinelRefused as exc:
            kinds = ("authentication_error", "authentication_error")
            raise Refused(
                401, "refused_sentinel", kinds, f"agentc: {exc}", reason=exc.reason
            ) from None

    def _upstream(self, grant: Grant) -> UpstreamConfig:
        upstream = self.config.upstreams.get(grant.upstream)
        if upstream is None:
            raise Refused(502, "no_upstream", ("api_error",) * 2, "agentc: no such upstream")
        return upstream

    def _check_route(self, api: Api, method: str, path: str) -> bool:
        route = route_for(api, method, path)
        if route is None:
            message = f"agentc: the model gateway does not forward {method} {path[:_LOGGED_PATH]}"
            kinds = ("not_found_error", "invalid_request_error")
            raise Refused(404, "refused_path", kinds, message, reason="not a harness call")
        return route.metered

    def _take_slot(self, grant: Grant) -> None:
        if self.slots.acquire(grant.launch_id):
            return
        # 503, not 429: a 429 reads as the vendor's rate limit (vendors.json, the supervisor).
        limit = self.config.launch_concurrency
        raise Refused(
            503,
            "refused_concurrency",
            ("overloaded_error", "server_error"),
            f"agentc: this launch already has {limit} model calls in flight",
            reason=f"{limit} calls in flight (launch_concurrency)",
            headers={"retry-after": "1"},
        )

    def _refuse(self, call: Call, api: Api, refusal: Refused) -> Response:
        call.status, call.outcome = refusal.status, refusal.outcome
        call.reason = call.reason or refusal.reason
        self._emit(call, None, None, ledger=refusal.outcome == "refused_cap")
        kind = refusal.kinds[0] if api == "anthropic" else refusal.kinds[1]
        return error_response(api, refusal.status, kind, refusal.message, headers=refusal.headers)

    async def _forward(
        self, request: Request, call: Call, upstream: UpstreamConfig, metered: bool
    ) -> Response:
        assert call.grant is not None
        api = upstream.api
        try:
            credential = self.credentials.get(upstream.credential_file)
        except CredentialError as exc:
            message = "agentc: the gateway has no credential"
            raise Refused(
                502, "credential_error", ("api_error",) * 2, message, reason=str(exc)
            ) from None
        try:
            body = await read_request_body(request, self.config.max_body_bytes)
        except BodyTooLarge as exc:
            kinds = ("request_too_large", "invalid_request_error")
            why = f"{exc} (max_body_bytes)"
            raise Refused(413, "refused_body", kinds, f"agentc: {why}", reason=why) from None
        except ClientDisconnect:
            call.outcome, call.status = "client_closed", 499
            self._emit(call, None, None)
            return Response(status_code=499)
        if metered:
            body = self.admission.request(call, api, body)
            self.ledger.admit_turn(call.grant.attempt)
        headers = _upstream_headers(request, api, credential)
        # The path matched by the allowlist, unchanged (routes.py), after the base URL's own.
        to = self.upstreams[call.grant.upstream]
        target = to.prefix + request.url.path
        if request.url.query:
            target += "?" + request.url.query
        try:
            answer = await to.send(request.method, target, headers, body)
        except UpstreamError as exc:
            message = "agentc: the provider is unreachable"
            kinds = ("api_error", "api_error")
            raise Refused(502, "upstream_unreachable", kinds, message, reason=exc.name) from None
        return self._relay(call, api, answer, body if metered else None)

    def _relay(self, call: Call, api: Api, answer: Answer, body: bytes | None) -> RelayResponse:
        assert call.grant is not None
        call.status = answer.status_code
        if answer.status_code == 429:
            self._exhausted(call.grant, answer.headers, call)
        meter: Meter | None = None
        if body is not None and answer.status_code < 400:
            streamed = (answer.headers.get("content-type") or "").startswith("text/event-stream")
            meter = Meter(api, streamed=streamed)
        out_headers = [(k, v) for k, v in answer.headers.pairs() if k.lower() not in _DROP_RESPONSE]
        grant = call.grant

        def settle() -> None:
            try:
                self._settle(call, api, meter, body or b"")
            finally:
                self.slots.release(grant.launch_id)
                self._relays.discard(relay)

        relay = Relay(answer, meter, call, self.drain, settle)
        self._relays.add(relay)
        relay.start()
        return RelayResponse(relay, answer.status_code, out_headers)

    def _settle(self, call: Call, api: Api, meter: Meter | None, body: bytes) -> None:
        """The call's records: metered tokens, or an estimate when the final usage never came."""
        if meter is None:
            self._emit(call, None, None)
            return
        tokens = meter.finish()
        model = meter.model
        if 200 <= call.status < 300:
            self.admission.answered(call, meter, tokens)
        if not meter.final:
            tokens, asked = estimate(api, tokens, body, self.config.estimate_output_tokens)
            model = model or asked
            call.estimated = True
            call.note("no final usage: the output is charged at the request's max_tokens")
        self._emit(call, tokens, model, ledger=True)

    def _exhausted(self, grant: Grant, headers: Headers, call: Call) -> None:
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
        self, call: Call, tokens: Tokens | None, model: str | None, *, ledger: bool = False
    ) -> None:
        """Write the call's log line and, with ``ledger``, its ledger row."""
        now_ms = int(self._clock() * 1000)
        cost = price_call(model, tokens, self.prices) if tokens is not None else None
        if ledger and call.grant is not None:
            self.ledger.append(ledger_row(call, call.grant, tokens, model, cost, now_ms))
        line = log_line(call, tokens, model, cost, now_ms)
        if self.launch_logs is not None and call.grant is not None:
            try:
                self.launch_logs.append(call.grant.launch_id, launch_event(line))
            except OSError as exc:  # the call's own log line says so; the call goes on
                line["launch_log_error"] = exc.strerror or str(exc)
        self._log.write(line)
