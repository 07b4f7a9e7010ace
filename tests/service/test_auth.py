"""Authentication and authorization, including hostile cases."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from agentc.core.model import PrincipalKind, PrincipalRole
from agentc.service.app import create_app
from agentc.service.auth import hash_password, verifier
from agentc.service.work.accounts import _add_principal
from agentc.store.sql import fetch_exists
from tests.service.console.kit import browse_as, form_of, post_form
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


def _login(svc: Service, username: str, password: str, address: str = "testclient") -> int:
    client = TestClient(svc.app, base_url=ORIGIN, client=(address, 50000))
    with client:
        resp = client.post(
            "/api/v1/auth/login",
            json={"username": username, "password": password},
            headers={"Origin": ORIGIN},
        )
    return resp.status_code


def test_sign_out_ends_the_session_at_once(svc: Service) -> None:
    person = svc.login("admin", ADMIN_PASSWORD)
    assert person.raw("GET", "/api/v1/me").status_code == 200
    no_csrf = Caller(svc.client, {"Origin": ORIGIN}, dict(person.cookies))
    assert no_csrf.raw("POST", "/api/v1/auth/logout").status_code == 403
    assert person.raw("POST", "/api/v1/auth/logout").status_code == 200
    assert person.raw("GET", "/api/v1/me").status_code == 401
    assert person.raw("POST", "/api/v1/auth/logout").status_code == 401
    token_hash = verifier(person.cookies["coordinator_local"])
    assert not svc.executor.read(
        lambda tx: fetch_exists(
            tx.conn, "SELECT id FROM browser_sessions WHERE token_hash = :h", h=token_hash
        )
    )


def test_password_change_ends_the_other_sessions(svc: Service) -> None:
    here, there = svc.login("admin", ADMIN_PASSWORD), svc.login("admin", ADMIN_PASSWORD)
    new = "a much better passphrase"
    wrong = here.raw(
        "POST", "/api/v1/me/password", {"current_password": "nope", "new_password": new}
    )
    assert wrong.status_code == 401
    short = here.raw(
        "POST", "/api/v1/me/password", {"current_password": ADMIN_PASSWORD, "new_password": "x"}
    )
    assert short.status_code == 422
    bad_origin = Caller(svc.client, {**here.headers, "Origin": "http://evil.example"}, here.cookies)
    body = {"current_password": ADMIN_PASSWORD, "new_password": new}
    assert bad_origin.raw("POST", "/api/v1/me/password", body).status_code == 403
    assert here.raw("POST", "/api/v1/me/password", body).status_code == 200
    assert here.raw("GET", "/api/v1/me").status_code == 200
    assert there.raw("GET", "/api/v1/me").status_code == 401
    assert _login(svc, "admin", ADMIN_PASSWORD, "10.1.1.1") == 401
    assert svc.login("admin", new).raw("GET", "/api/v1/me").status_code == 200


def test_a_disabled_account_is_refused_at_once(svc: Service) -> None:
    svc.executor.write(
        lambda tx: _add_principal(
            tx.conn,
            tx.now,
            "bob",
            PrincipalKind.HUMAN,
            PrincipalRole.OPERATOR,
            hash_password(ADMIN_PASSWORD),
        )
    )
    bob = svc.login("bob", ADMIN_PASSWORD)
    bob_id = bob.get("/api/v1/me")["actor"]["id"]
    svc.admin.post(f"/api/v1/admin/principals/{bob_id}/disable")
    assert bob.raw("GET", "/api/v1/me").status_code == 401
    assert _login(svc, "bob", ADMIN_PASSWORD, "10.2.2.2") == 401


def test_rotate_replaces_and_revokes(svc: Service) -> None:
    issued = svc.admin.post("/api/v1/admin/agents", {"name": "rot", "access": "read"})
    old = Caller(svc.client, {"Authorization": f"Bearer {issued['token']}"})
    assert old.raw("GET", "/api/v1/projects").status_code == 200
    key = "rotate-key-1"
    path = f"/api/v1/admin/credentials/{issued['credential_id']}/rotate"
    new = svc.admin.post(path, key=key)
    assert new["agent_id"] == issued["agent_id"] and new["access"] == "read"
    assert old.raw("GET", "/api/v1/projects").status_code == 401
    fresh = Caller(svc.client, {"Authorization": f"Bearer {new['token']}"})
    assert fresh.raw("GET", "/api/v1/projects").status_code == 200
    again = svc.admin.post(path, key=key)  # a retry recovers the identity, never the token
    assert again["credential_id"] == new["credential_id"] and "token" not in again
    with pytest.raises(ApiError) as err:
        svc.admin.post(path)
    assert err.value.status == 409


def test_an_agent_holds_several_named_credentials(svc: Service) -> None:
    body = {"name": "builder", "credential_name": "laptop"}
    laptop = svc.admin.post("/api/v1/admin/agents", body)
    ci = svc.admin.post("/api/v1/admin/agents", {**body, "credential_name": "ci-host-2"})
    default = svc.admin.post("/api/v1/admin/agents", {"name": "builder"})
    assert laptop["agent_id"] == ci["agent_id"] == default["agent_id"]
    names = [x["credential_name"] for x in (laptop, ci, default)]
    assert names == ["laptop", "ci-host-2", "initial"]
    rotated = svc.admin.post(f"/api/v1/admin/credentials/{ci['credential_id']}/rotate")
    assert rotated["credential_name"] == "ci-host-2"
    for bad in ("", "two words", "x" * 101, "semi;colon"):
        with pytest.raises(ApiError) as err:
            svc.admin.post("/api/v1/admin/agents", {**body, "credential_name": bad})
        assert err.value.status == 422 and "credential_name" in str(err.value), bad
    # The console's issue form names the credential too, and the page that shows the token
    # says which credential it is.
    browse_as(svc, svc.admin)
    form = {**form_of(svc), "name": "builder", "credential_name": "phone"}
    shown = post_form(svc, "/console/access/agents", form)
    assert shown.status_code == 200 and "credential “phone”" in shown.text, shown.text
    # The Access page lists each credential by its name.
    browse_as(svc, svc.admin)
    page = svc.client.get("/console/access").text
    for cred, name in ((laptop, "laptop"), (rotated, "ci-host-2"), (default, "initial")):
        row = re.search(rf'<tr data-credential="{cred["credential_id"]}">(.*?)</tr>', page, re.S)
        assert row and f"<td>{name} <code>" in row.group(1), (name, page)


def test_https_accepts_only_the_host_cookie(svc: Service) -> None:
    origin = "https://coord.example"
    settings = svc.settings.model_copy(update={"public_origin": origin})
    app = create_app(settings, clock=svc.clock, executor=svc.executor)
    with TestClient(app, base_url=origin) as client:
        resp = client.post(
            "/api/v1/auth/login",
            json={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"Origin": origin},
        )
        assert resp.status_code == 200
        assert "__Host-coordinator=" in resp.headers["set-cookie"]
        assert "Secure" in resp.headers["set-cookie"]
        cookie = resp.cookies["__Host-coordinator"]
        client.cookies.clear()
        client.cookies.set("coordinator_local", cookie)  # a sibling host's plain cookie
        assert client.get("/api/v1/me").status_code == 401
        client.cookies.clear()
        client.cookies.set("__Host-coordinator", cookie)
        assert client.get("/api/v1/me").status_code == 200


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


def test_an_admin_adds_a_person_and_the_password_stays_secret(svc: Service) -> None:
    secret = "carol's first passphrase"
    body = {"name": "carol", "role": "operator", "password": secret}
    carol = svc.admin.post("/api/v1/admin/people", body, key="add-carol")
    assert carol["name"] == "carol" and carol["role"] == "operator"
    assert svc.admin.post("/api/v1/admin/people", body, key="add-carol")["id"] == carol["id"]
    with pytest.raises(ApiError) as err:  # the name is taken
        svc.admin.post("/api/v1/admin/people", body)
    assert err.value.status == 409
    person = svc.login("carol", secret)
    with pytest.raises(ApiError) as err:  # an operator does not add people
        person.post("/api/v1/admin/people", {"name": "dave", "password": secret})
    assert err.value.status == 403
    with pytest.raises(ApiError) as err:
        svc.admin.post("/api/v1/admin/people", {"name": "eve", "role": "agent", "password": secret})
    assert err.value.status == 422
    rows = svc.executor.read(
        lambda tx: [
            str(r)
            for table in ("receipts", "events")
            for r in tx.conn.exec_driver_sql(f"SELECT * FROM {table}").fetchall()
        ]
    )
    assert rows and not any(secret in r for r in rows)
