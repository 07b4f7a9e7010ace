"""Ending one chosen browser session: an admin ends anyone's, a person their own; the
session's verifier is deleted at once, so its next request is refused."""

from __future__ import annotations

import pytest

from tests.service.kit import ADMIN_PASSWORD, ApiError, Caller, Service

OLGA = "olga's passphrase"


def _sessions(caller: Caller) -> list[dict[str, object]]:
    items: list[dict[str, object]] = caller.get("/api/v1/browser-sessions")["items"]
    return items


def _end(caller: Caller, session_id: object) -> dict[str, object]:
    data: dict[str, object] = caller.post(f"/api/v1/browser-sessions/{session_id}/end")
    return data


def test_an_admin_ends_one_chosen_session(svc: Service) -> None:
    svc.admin.post("/api/v1/admin/people", {"name": "olga", "role": "operator", "password": OLGA})
    laptop, phone = svc.login("olga", OLGA), svc.login("olga", OLGA)
    listed = [s for s in _sessions(svc.admin) if s["name"] == "olga"]
    assert len(listed) == 2 and not any(s["current"] for s in listed)
    assert [s["current"] for s in _sessions(svc.admin) if s["name"] == "admin"] == [True]
    # Which listed session is the phone's: the one the phone sees as current.
    phone_id = next(s["id"] for s in _sessions(phone) if s["current"])

    assert _end(svc.admin, phone_id) == {
        "session_id": phone_id,
        "principal_id": listed[0]["principal_id"],
        "ended": True,
    }
    with pytest.raises(ApiError) as err:
        phone.get("/api/v1/me")
    assert err.value.status == 401  # refused on its very next request
    assert laptop.get("/api/v1/me")["actor"]["name"] == "olga"  # the other one lives on
    assert [s["id"] for s in _sessions(svc.admin) if s["name"] == "olga"] != [phone_id]
    with pytest.raises(ApiError) as err:  # ended already: nothing to end
        _end(svc.admin, phone_id)
    assert err.value.status == 404


def test_a_person_ends_only_their_own_sessions(svc: Service) -> None:
    svc.admin.post("/api/v1/admin/people", {"name": "olga", "role": "operator", "password": OLGA})
    laptop, phone = svc.login("olga", OLGA), svc.login("olga", OLGA)
    mine = _sessions(laptop)
    assert {s["name"] for s in mine} == {"olga"} and len(mine) == 2  # not the admin's
    admin_id = next(s["id"] for s in _sessions(svc.admin) if s["name"] == "admin")
    with pytest.raises(ApiError) as err:  # another person's session is no session to her
        _end(laptop, admin_id)
    assert err.value.status == 404
    assert svc.admin.get("/api/v1/me")["actor"]["name"] == "admin"

    phone_id = next(s["id"] for s in _sessions(phone) if s["current"])
    _end(laptop, phone_id)
    with pytest.raises(ApiError) as err:
        phone.get("/api/v1/me")
    assert err.value.status == 401
    assert laptop.get("/api/v1/me")["actor"]["name"] == "olga"


def test_ending_a_session_needs_a_person_and_the_browser_write_rules(svc: Service) -> None:
    other = svc.login("admin", ADMIN_PASSWORD)
    other_id = next(s["id"] for s in _sessions(other) if s["current"])
    agent = svc.agent(session=False)
    with pytest.raises(ApiError) as err:
        _end(agent, other_id)
    assert err.value.status == 403
    with pytest.raises(ApiError) as err:
        _sessions(agent)
    assert err.value.status == 403
    path = f"/api/v1/browser-sessions/{other_id}/end"
    no_csrf = {k: v for k, v in svc.admin.headers.items() if k != "X-CSRF-Token"}
    assert Caller(svc.client, no_csrf, svc.admin.cookies).raw("POST", path).status_code == 403
    evil = {**svc.admin.headers, "Origin": "http://evil.example"}
    assert Caller(svc.client, evil, svc.admin.cookies).raw("POST", path).status_code == 403
    assert other.get("/api/v1/me")["actor"]["name"] == "admin"  # still alive
    _end(svc.admin, other_id)
    events = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql(
            "SELECT kind, record_id FROM events WHERE kind = 'browser_session_ended'"
        ).fetchall()
    )
    assert [tuple(e) for e in events] == [("browser_session_ended", other_id)]
