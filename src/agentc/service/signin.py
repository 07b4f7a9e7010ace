"""Signing in and the current-password check of a password change, throttled by
`agentc.service.limiter`; the session and device cookies; the address the throttle counts."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from agentc.core.addresses import is_loopback_host
from agentc.core.browser import cookie_name, device_cookie_name
from agentc.core.errors import CoordinatorError
from agentc.core.model import PrincipalKind
from agentc.service.auth import BROWSER_SESSION_MS, new_secret, verifier, verify_password
from agentc.service.limiter import (
    DEVICE_COOKIE_MS,
    Client,
    device_of,
    mint_device,
    name_key_of,
    source_of,
)
from agentc.service.ops import JsonObject, Runtime, new_id
from agentc.store import epoch, throttle
from agentc.store.accounts import BrowserSession, Principal, principal_by_name
from agentc.store.sql import insert
from agentc.store.tx import Tx


def client_address(request: Request, trusted_header: str | None) -> str:
    """The address sign-in throttling counts: the peer, or, when a trusted proxy header is
    configured and the peer is the loopback proxy, the last address that proxy appended."""
    peer = request.client.host if request.client else "unknown"
    if trusted_header and is_loopback_host(peer):
        value = request.headers.get(trusted_header, "")
        forwarded = value.rsplit(",", 1)[-1].strip()
        if forwarded:
            return forwarded[:64]
    return peer


def client_of(rt: Runtime, request: Request) -> Client:
    address = client_address(request, rt.settings.trusted_proxy_header)
    device = request.cookies.get(device_cookie_name(rt.settings.https))
    return Client(source_of(address), device)


@dataclass(frozen=True)
class SignedIn:
    cookie: str
    device_cookie: str
    actor: JsonObject
    now: int


async def sign_in(rt: Runtime, username: str, password: str, client: Client) -> SignedIn:
    """Check the password (throttled as above) and open a browser session at the public
    origin; the answer carries a fresh device cookie for the account."""
    limiter, name_key = rt.limiter, name_key_of(username)

    def look(tx: Tx) -> tuple[Principal | None, str | None]:
        row = principal_by_name(tx.conn, username)
        if row is not None and row.kind != PrincipalKind.HUMAN:
            row = None  # agents do not sign in
        device = device_of(tx.conn, client.device_cookie, row.id, tx.now) if row else None
        limiter.check(tx.conn, name_key, client, device, tx.now)  # what every process counts
        return row, device

    row, device = await run_in_threadpool(rt.executor.read, look)
    ok = await run_in_threadpool(verify_password, row.password_hash if row else None, password)
    if not ok or row is None or row.disabled_at is not None:
        await rt.executor.write_async(
            lambda tx: limiter.failed(tx.conn, name_key, client, device, tx.now)
        )
        raise CoordinatorError("authentication_required", "wrong username or password", status=401)
    cookie, person, origin = new_secret(), row, rt.settings.public_origin

    def work(tx: Tx) -> SignedIn:
        limiter.succeeded(tx.conn, device)
        session = BrowserSession(
            new_id(),
            person.id,
            verifier(cookie),
            tx.now,
            tx.now + BROWSER_SESSION_MS,
            None,
            origin,
            epoch.current(tx.conn),
        )
        insert(tx.conn, session)
        minted = mint_device(throttle.device_key_made(tx.conn), person.id, tx.now)
        actor = {"id": person.id, "name": person.name, "role": person.role}
        return SignedIn(cookie, minted, actor, tx.now)

    return await rt.executor.write_async(work)


async def check_current_password(
    rt: Runtime, principal: Principal, password: str, client: Client
) -> str | None:
    """A password change's check of the current password, throttled as a sign-in is; returns
    the device lane it was in (for the change to clear), or raises 401 / 429."""
    limiter = rt.limiter

    def look(tx: Tx) -> str | None:
        device = device_of(tx.conn, client.device_cookie, principal.id, tx.now)
        limiter.check(tx.conn, principal.name_key, client, device, tx.now)
        return device

    device = await run_in_threadpool(rt.executor.read, look)
    if not await run_in_threadpool(verify_password, principal.password_hash, password):
        await rt.executor.write_async(
            lambda tx: limiter.failed(tx.conn, principal.name_key, client, device, tx.now)
        )
        raise CoordinatorError(
            "authentication_required",
            "the current password is wrong",
            status=401,
            details={"field": "current_password"},
        )
    return device


def set_session_cookie(rt: Runtime, resp: Response, cookie: str) -> None:
    _set_cookie(rt, resp, cookie_name(rt.settings.https), cookie, BROWSER_SESSION_MS)


def set_device_cookie(rt: Runtime, resp: Response, value: str) -> None:
    _set_cookie(rt, resp, device_cookie_name(rt.settings.https), value, DEVICE_COOKIE_MS)


def _set_cookie(rt: Runtime, resp: Response, name: str, value: str, lifetime_ms: int) -> None:
    """Host-only (no Domain: sent only under the console's own name), HttpOnly, SameSite
    Strict, Secure on https (then named __Host-)."""
    resp.set_cookie(
        name,
        value,
        max_age=lifetime_ms // 1000,
        path="/",
        httponly=True,
        samesite="strict",
        secure=rt.settings.https,
    )


def check_origin(rt: Runtime, request: Request, what: str) -> None:
    if request.headers.get("origin") != rt.settings.public_origin:
        raise CoordinatorError(
            "operation_not_permitted",
            f"{what} must come from the configured public origin",
            status=403,
        )
