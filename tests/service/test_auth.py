"""Authentication and authorization, including hostile cases."""

from __future__ import annotations

import pytest

from tests.service.kit import ADMIN_PASSWORD, ORIGIN, ApiError, Caller, Service


def test_private_paths_answer_401_before_existence(svc: Service) -> None:
    anon = svc.anonymous()
    for path in ("/api/v1/projects", "/api/v1/projects/nope/tasks/nope", "/api/v1/no/such"):
        resp = anon.raw("GET", path)
        assert resp.status_code == 401, path
        err = resp.json()["error"]
        assert err["code"] == "authentication_required"
        assert err["details"]["help_path"] == "/api/v1/help/authentication"
    assert anon.raw("GET", "/api/v1/info").status_code == 200
    assert anon.raw("GET", "/healthz").json() == {"status": "ok"}


def test_bad_and_mixed_credentials(svc: Service) -> None:
    for header in ("Bearer short", "Bearer " + "z" * 64, "Basic abc", "Bearer a;b" + "c" * 40):
        resp = Caller(svc.client, {"Authorization": header}).raw("GET", "/api/v1/projects")
        assert resp.status_code == 401, header
    agent = svc.agent(session=False)
    both = Caller(svc.client, dict(agent.headers), dict(svc.admin.cookies))
    assert both.raw("GET", "/api/v1/projects").status_code == 401
    half = Caller(svc.client, {**agent.headers, "X-Coordinator-Session": "s"})
    assert half.raw("GET", "/api/v1/projects").status_code == 401


def test_a_session_proof_is_bound_to_its_credential(svc: Service) -> None:
    a, b = svc.agent(), svc.agent(session=False)
    stolen = Caller(
        svc.client,
        {
            **b.headers,
            "X-Coordinator-Session": a.headers["X-Coordinator-Session"],
            "X-Coordinator-Session-Proof": a.headers["X-Coordinator-Session-Proof"],
        },
    )
    assert stolen.raw("GET", "/api/v1/projects").status_code == 401
    wrong_proof = Caller(svc.client, {**a.headers, "X-Coordinator-Session-Proof": "f" * 64})
    assert wrong_proof.raw("GET", "/api/v1/projects").status_code == 401


def test_browser_writes_need_origin_and_csrf(svc: Service) -> None:
    body = {"name": "p1", "repository_url": "https://x/y"}
    no_csrf = Caller(svc.client, {"Origin": ORIGIN}, dict(svc.admin.cookies))
    assert no_csrf.raw("POST", "/api/v1/projects", body).status_code == 403
    bad_origin = Caller(
        svc.client, {**svc.admin.headers, "Origin": "http://evil.example"}, dict(svc.admin.cookies)
    )
    assert bad_origin.raw("POST", "/api/v1/projects", body).status_code == 403
    assert svc.admin.raw("POST", "/api/v1/projects", body).status_code == 201


def test_agents_cannot_do_human_things(svc: Service) -> None:
    agent = svc.agent()
    for path, body in (
        ("/api/v1/projects", {"name": "p", "repository_url": "https://x/y"}),
        ("/api/v1/admin/agents", {"name": "other"}),
    ):
        with pytest.raises(ApiError) as err:
            agent.post(path, body)
        assert err.value.status == 403


def test_login_is_rate_limited_per_username(svc: Service) -> None:
    codes = []
    for _ in range(6):
        resp = svc.client.post(
            "/api/v1/auth/login",
            json={"username": "mallory", "password": "wrong password!!"},
            headers={"Origin": ORIGIN},
        )
        codes.append(resp.status_code)
    assert codes == [401] * 5 + [429]
    resp = svc.client.post(
        "/api/v1/auth/login",
        json={"username": "mallory", "password": "wrong password!!"},
        headers={"Origin": ORIGIN, "X-Forwarded-For": "10.9.9.9"},
    )
    assert resp.status_code == 429  # forwarded headers never bypass the limit
    assert resp.headers["retry-after"] == "60"
    # Another name is still allowed (the per-name limit), and the right password works.
    assert svc.login("admin", ADMIN_PASSWORD).cookies


def test_login_needs_the_public_origin(svc: Service) -> None:
    resp = svc.client.post(
        "/api/v1/auth/login",
        json={"username": "admin", "password": ADMIN_PASSWORD},
        headers={"Origin": "http://evil.example"},
    )
    assert resp.status_code == 403


def test_security_headers(svc: Service) -> None:
    resp = svc.anonymous().raw("GET", "/healthz")
    assert resp.headers["cache-control"] == "no-store"
    assert resp.headers["x-frame-options"] == "DENY"
    assert resp.headers["x-content-type-options"] == "nosniff"
