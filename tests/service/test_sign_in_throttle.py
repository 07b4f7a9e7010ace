"""Sign-in throttling that cannot lock people out (agentc.service.limiter), both sides played
with requests: many guesses from many sources, then the person signing in.

The service's clock is the test's; requests come from the client addresses the tests choose
(`TestClient(client=...)`); `tests/service/console/test_console_users.py` plays the same game
over real sockets from real 127/8 source addresses against a real server and a real browser.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from agentc.service.limiter import LOOPBACK_SOURCE, source_of
from agentc.service.signin import client_address
from tests.service.kit import ADMIN_PASSWORD, ORIGIN, Caller, Clock, Service, running

WRONG = "not the password at all"
DEVICE = "coordinator_device"


def api_sign_in(
    svc: Service, name: str, password: str, address: str, device: str | None = None
) -> httpx2.Response:
    """POST /api/v1/auth/login from `address`, with a device cookie when given."""
    body = {"username": name, "password": password}
    return _post(svc, "/api/v1/auth/login", address, device, json=body)


def form_sign_in(
    svc: Service, name: str, password: str, address: str, device: str | None = None
) -> httpx2.Response:
    """The console's sign-in form posted from `address` (a browser's way)."""
    fields = {"username": name, "password": password, "next": "/console/projects"}
    return _post(svc, "/console/sign-in", address, device, data=fields)


def _post(
    svc: Service, path: str, address: str, device: str | None, **body: Any
) -> httpx2.Response:
    with TestClient(svc.app, base_url=ORIGIN, client=(address, 50000)) as client:
        if device:
            client.cookies.set(DEVICE, device)
        return client.post(path, headers={"Origin": ORIGIN}, follow_redirects=False, **body)


def device_of(resp: httpx2.Response) -> str:
    assert resp.status_code == 303, resp.text
    value: str = resp.cookies[DEVICE]
    return value


def loopback(i: int) -> str:
    """The i-th of many loopback source addresses (any local program may use any)."""
    return f"127.{i // 200}.{i % 200}.{i % 7 + 2}"


def failures(svc: Service, name: str) -> int:
    """Password checks that failed for the name (each is a row of the throttle's record)."""
    rows = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql(
            f"SELECT count(*) FROM sign_in_failures WHERE name = '{name}'"
        ).scalar_one()
    )
    return int(rows)


def retry_after(resp: httpx2.Response) -> int:
    assert resp.status_code == 429, resp.text
    seconds: int = resp.json()["error"]["details"]["retry_after_seconds"]
    return seconds


def test_sixty_guesses_from_sixty_loopback_sources_are_limited_per_account(
    svc: Service, clock: Clock
) -> None:
    sources = [loopback(i) for i in range(59)] + ["::1"]
    codes = [api_sign_in(svc, "admin", WRONG, a).status_code for a in sources]
    assert codes == [401] * 5 + [429] * 55
    assert failures(svc, "admin") == 5  # the refused ones never reached the password
    # The case of the name changes nothing: it is the same account.
    assert api_sign_in(svc, "ADMIN", WRONG, "127.9.9.9").status_code == 429
    # The wait after the latest failure doubles (2 s, 4 s, ...): one guess each time it ends.
    for wait in (2, 4, 8):
        clock.advance(wait - 0.5)
        assert api_sign_in(svc, "admin", WRONG, "127.1.2.3").status_code == 429
        clock.advance(0.5)
        assert api_sign_in(svc, "admin", WRONG, "127.3.2.1").status_code == 401
    assert failures(svc, "admin") == 8


def test_a_day_of_guessing_one_account_checks_about_a_hundred_passwords(
    svc: Service, clock: Clock
) -> None:
    """The attacker tries the moment each wait ends, from a new loopback source each time:
    the waits never pass 15 minutes, and a day lets a trickle of guesses through."""
    start, checked, waits, i = clock.now, 0, [], 0
    while clock.now - start < 24 * 3600 * 1000:
        resp = api_sign_in(svc, "admin", WRONG, loopback(i))
        i += 1
        if resp.status_code == 401:
            checked += 1
            continue
        waits.append(retry_after(resp))
        clock.advance(waits[-1])
    assert max(waits) == 900  # a refusal is never longer than 15 minutes...
    assert 100 <= checked <= 115, checked  # ...and 5 free, 9 doublings, then 4 an hour


def test_all_of_loopback_is_one_source(svc: Service) -> None:
    """Made-up names, so no account's lane comes into it: 30 failures a minute per source."""
    codes = [api_sign_in(svc, f"nobody-{i}", WRONG, loopback(i)).status_code for i in range(30)]
    assert codes == [401] * 30
    for address in ("127.200.0.9", "::1", "::ffff:127.0.0.3", "127.0.0.1"):
        assert api_sign_in(svc, "nobody-else", WRONG, address).status_code == 429, address
    # Another source counts its own failures.
    assert api_sign_in(svc, "nobody-else", WRONG, "192.0.2.7").status_code == 401


def test_a_browser_that_signed_in_before_gets_in_while_someone_guesses(svc: Service) -> None:
    mine = device_of(form_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1"))
    # Someone else guesses the admin's password and sprays made-up names, from all of 127/8.
    guesses = [api_sign_in(svc, "admin", WRONG, loopback(i)).status_code for i in range(40)]
    assert guesses == [401] * 5 + [429] * 35
    spray = [api_sign_in(svc, f"x-{i}", WRONG, loopback(i)).status_code for i in range(40)]
    assert 429 in spray
    # Without a device cookie even the right password waits (the account's lane)...
    refused = form_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1")
    assert refused.status_code == 429 and "wait" in refused.text
    assert api_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1").status_code == 429
    # ...the person's browser is not held back: by the form or the API, it gets in.
    again = form_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", mine)
    assert again.headers["location"] == "/console/projects"
    assert api_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", mine).status_code == 200
    # Its own lane is its own: its mistypes slow it alone, and its success clears them.
    fresh = device_of(again)
    mistypes = [form_sign_in(svc, "admin", WRONG, "127.0.0.1", fresh).status_code for _ in range(6)]
    assert mistypes == [401] * 5 + [429]
    other_browser = device_of(form_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", mine))
    assert form_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", other_browser).status_code == 303


def test_a_device_cookie_holds_for_its_own_account_only_and_not_forever(
    svc: Service, clock: Clock
) -> None:
    operator = svc.admin.post(
        "/api/v1/admin/people", {"name": "olga", "role": "operator", "password": ADMIN_PASSWORD}
    )
    assert operator["name"] == "olga"
    olgas = device_of(form_sign_in(svc, "olga", ADMIN_PASSWORD, "127.0.0.1"))
    admins = device_of(form_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1"))
    for i in range(6):
        api_sign_in(svc, "admin", WRONG, loopback(i))
    assert api_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", olgas).status_code == 429
    nonce, issued, mac = admins.split(".")
    forged = [
        f"{nonce}.{issued}.{mac[:-1]}{'0' if mac[-1] != '0' else '1'}",  # another signature
        f"{'0' * 32}.{issued}.{mac}",  # another device under the same signature
        f"{nonce}.{int(issued) + 1}.{mac}",  # a later issue time
        "garbage",
    ]
    for cookie in forged:
        assert api_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", cookie).status_code == 429
    assert api_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", admins).status_code == 200
    # A year on, the cookie is no longer honoured: the next guesser holds it back again.
    clock.advance(366 * 24 * 3600)
    for i in range(6):
        api_sign_in(svc, "admin", WRONG, loopback(i))
    assert api_sign_in(svc, "admin", ADMIN_PASSWORD, "127.0.0.1", admins).status_code == 429


def test_without_a_device_cookie_the_wait_ends(svc: Service, clock: Clock) -> None:
    for i in range(7):
        api_sign_in(svc, "admin", WRONG, loopback(i))
    wait = retry_after(api_sign_in(svc, "admin", ADMIN_PASSWORD, "192.0.2.1"))
    assert 0 < wait <= 900
    clock.advance(wait)
    assert api_sign_in(svc, "admin", ADMIN_PASSWORD, "192.0.2.1").status_code == 200


def _change(svc: Service, who: Caller, current: str, device: str | None = None) -> int:
    cookies = {**who.cookies, **({DEVICE: device} if device else {})}
    caller = Caller(svc.client, who.headers, cookies)
    body = {"current_password": current, "new_password": "a new passphrase for bob"}
    return caller.raw("POST", "/api/v1/me/password", body).status_code


def test_the_current_password_check_of_a_change_is_throttled_the_same_way(svc: Service) -> None:
    svc.admin.post(
        "/api/v1/admin/people", {"name": "bob", "role": "operator", "password": ADMIN_PASSWORD}
    )
    device = device_of(form_sign_in(svc, "bob", ADMIN_PASSWORD, "127.0.0.1"))
    bob = svc.login("bob", ADMIN_PASSWORD)  # a session without the device cookie
    codes = [_change(svc, bob, WRONG) for _ in range(6)]
    assert codes == [401] * 5 + [429]
    assert _change(svc, bob, ADMIN_PASSWORD) == 429  # the account's lane waits, right or not
    # The same lane as sign-in: a guesser of bob's password by sign-in waits too.
    assert api_sign_in(svc, "bob", WRONG, "127.0.0.5").status_code == 429
    # bob's own browser (its device cookie) changes the password.
    assert _change(svc, bob, ADMIN_PASSWORD, device) == 200


def test_behind_a_proxy_the_forwarded_address_is_the_source(database: str) -> None:
    with running(database, Clock(), trusted_proxy_header="X-Forwarded-For") as svc:

        def via_proxy(name: str, forwarded: str) -> int:
            with TestClient(svc.app, base_url=ORIGIN, client=("127.0.0.1", 50000)) as client:
                return client.post(
                    "/api/v1/auth/login",
                    json={"username": name, "password": WRONG},
                    headers={"Origin": ORIGIN, "X-Forwarded-For": f"10.0.0.1, {forwarded}"},
                ).status_code

        codes = [via_proxy(f"nobody-{i}", "203.0.113.9") for i in range(31)]
        assert codes == [401] * 30 + [429]
        assert via_proxy("nobody-else", "203.0.113.10") == 401  # another client of the proxy
        # Forwarded loopback addresses are one source too; IPv6 clients count by /64.
        for i in range(30):
            via_proxy(f"v6-{i}", f"2001:db8:1:2::{i + 1}")
        assert via_proxy("v6-last", "2001:db8:1:2:ffff::1") == 429
        assert via_proxy("v6-last", "2001:db8:1:3::1") == 401
        # Guessing one account from many forwarded addresses is limited per account.
        guesses = [via_proxy("admin", f"198.51.100.{i}") for i in range(8)]
        assert guesses == [401] * 5 + [429] * 3


def _request(peer: str, headers: dict[str, str]) -> Any:
    from starlette.requests import Request

    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "client": (peer, 5000), "headers": raw})


def test_throttling_reads_the_trusted_proxy_header_only_from_a_loopback_proxy() -> None:
    forwarded = {"X-Forwarded-For": "198.51.100.9, 203.0.113.7"}
    # the proxy appends the client it saw last: that is the address counted
    assert client_address(_request("127.0.0.1", forwarded), "X-Forwarded-For") == "203.0.113.7"
    # no header configured: forwarded headers are ignored (a client could forge them)
    assert client_address(_request("127.0.0.1", forwarded), None) == "127.0.0.1"
    # a peer that is not the loopback proxy cannot choose its counted address
    assert client_address(_request("192.0.2.1", forwarded), "X-Forwarded-For") == "192.0.2.1"
    assert client_address(_request("127.0.0.1", {}), "X-Forwarded-For") == "127.0.0.1"


@pytest.mark.parametrize(
    ("address", "source"),
    [
        ("127.0.0.1", LOOPBACK_SOURCE),
        ("127.254.3.9", LOOPBACK_SOURCE),
        ("::1", LOOPBACK_SOURCE),
        ("::ffff:127.0.0.2", LOOPBACK_SOURCE),
        ("localhost", LOOPBACK_SOURCE),
        ("192.0.2.1", "192.0.2.1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("2001:db8:a:b:c:d:e:f", "2001:db8:a:b::/64"),
        ("testclient", "testclient"),
    ],
)
def test_sources(address: str, source: str) -> None:
    assert source_of(address) == source
