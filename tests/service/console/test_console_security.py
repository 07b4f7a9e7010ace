"""Hostile tests of the console's writes: the same Origin, CSRF, key and session rules as the
API, and refusals shown as pages (never a traceback)."""

from __future__ import annotations

import re

from tests.service.console.kit import browse_as, form_of, post_form
from tests.service.kit import ADMIN_PASSWORD, ORIGIN, Service


def _form(svc: Service, path: str = "/console/access") -> dict[str, str]:
    form = form_of(svc, path)
    return {**form, "idempotency_key": "key-" + form["csrf"][:8]}


def _signed_in(svc: Service) -> None:
    browse_as(svc, svc.admin)


_post = post_form


def test_writes_need_the_origin_and_the_csrf_token(svc: Service) -> None:
    _signed_in(svc)
    form = {**_form(svc), "name": "intruder"}
    for origin in (None, "http://evil.example", "null"):
        resp = _post(svc, "/console/access/agents", form, origin)
        assert resp.status_code == 403 and "Traceback" not in resp.text
    for csrf in ("", "0" * 64):
        resp = _post(svc, "/console/access/agents", {**form, "csrf": csrf})
        assert resp.status_code == 403
    assert "intruder" not in svc.client.get("/console/access").text
    no_key = {k: v for k, v in form.items() if k != "idempotency_key"}
    assert _post(svc, "/console/access/agents", no_key).status_code == 400
    assert _post(svc, "/console/access/agents", form).status_code == 200
    # The same key with other input is refused; with the same input the token is not shown.
    assert _post(svc, "/console/access/agents", {**form, "name": "other"}).status_code == 409
    again = _post(svc, "/console/access/agents", form)
    assert again.status_code == 200 and 'id="token"' not in again.text
    assert "cannot be shown again" in again.text


def test_sign_in_needs_the_origin_and_bad_input_is_a_page(svc: Service) -> None:
    svc.client.cookies.clear()
    body = {"username": "admin", "password": ADMIN_PASSWORD, "next": "//evil.example/x"}
    assert _post(svc, "/console/sign-in", body, "http://evil.example").status_code == 403
    ok = _post(svc, "/console/sign-in", body)
    assert ok.status_code == 303 and ok.headers["location"] == "/console/projects"
    assert "httponly" in ok.headers["set-cookie"].lower()
    assert "samesite=strict" in ok.headers["set-cookie"].lower()
    wrong = _post(svc, "/console/sign-in", {**body, "password": "nope"})
    assert wrong.status_code == 401 and "wrong username or password" in wrong.text
    _signed_in(svc)
    pid = svc.project()
    bad = _post(
        svc,
        f"/console/projects/{pid}/tasks",
        {**_form(svc), "title": "", "acceptance_criteria": ""},
    )
    assert bad.status_code == 422 and "Traceback" not in bad.text


def test_pages_need_a_live_session(svc: Service) -> None:
    svc.client.cookies.clear()
    for path in ("/console/projects", "/console/access", "/console/account"):
        resp = svc.client.get(path, follow_redirects=False)
        assert resp.status_code == 303 and resp.headers["location"].startswith("/console/sign-in")
    agent = svc.agent(session=False)
    resp = svc.client.get(
        "/console/projects", headers=agent.headers, follow_redirects=False
    )  # a bearer token is not a console session
    assert resp.status_code == 303
    _signed_in(svc)
    form = _form(svc)
    assert _post(svc, "/console/sign-out", form).status_code == 303
    _signed_in(svc)  # the old cookie again
    assert svc.client.get("/console/projects", follow_redirects=False).status_code == 303
    assert _post(svc, "/console/access/agents", {**form, "name": "late"}).status_code == 401


def test_every_page_keeps_the_strict_policy(svc: Service) -> None:
    _signed_in(svc)
    pid = svc.project()
    task = svc.task(pid)
    for path in (
        "/console/projects",
        f"/console/projects/{pid}",
        f"/console/projects/{pid}/tasks/new",
        f"/console/projects/{pid}/tasks/{task['id']}",
        f"/console/projects/{pid}/settings",
        f"/console/projects/{pid}/costs",
        f"/console/projects/{pid}/attention",
        "/console/attention",
        "/console/access",
        "/console/account",
        "/console/sign-in",
    ):
        resp = svc.client.get(path)
        assert resp.status_code == 200, path
        csp = resp.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert re.search(r"<script(?![^>]*\bsrc=)", resp.text) is None, path  # no inline script
        assert re.search(r"<[^>]+\son[a-z]+=", resp.text) is None, path  # no inline handler
        assert re.search(r"<[^>]+\sstyle=", resp.text) is None, path  # no inline style
        assert "<style" not in resp.text, path
        assert "http://" not in resp.text.replace(ORIGIN, "")  # nothing from elsewhere


def test_an_admin_adds_a_person_from_the_access_page(svc: Service) -> None:
    _signed_in(svc)
    form = {**_form(svc), "name": "frank", "role": "operator", "password": "short"}
    assert _post(svc, "/console/access/people", form).status_code == 422
    form = {**_form(svc), "name": "frank", "role": "operator", "password": "frank's passphrase"}
    assert _post(svc, "/console/access/people", form).status_code == 303
    page = svc.client.get("/console/access").text
    assert re.search(
        r"<td>frank</td><td>human</td><td>operator</td><td>enabled</td>"
        r"<td>0 session\(s\)</td>",
        page,
    ), page
    assert svc.login("frank", "frank's passphrase").get("/api/v1/me")["actor"]["role"] == "operator"


def test_a_task_is_edited_with_its_revision(svc: Service) -> None:
    _signed_in(svc)
    pid = svc.project()
    task = svc.task(pid)
    path = f"/console/projects/{pid}/tasks/{task['id']}"
    assert "Edit the task" in svc.client.get(path).text
    body = {"title": "renamed", "acceptance_criteria": "a\nb", "priority": "0", "depends_on": ""}
    stale = {**_form(svc, path), **body, "expected_revision": str(task["revision"] + 5)}
    assert _post(svc, path + "/edit", stale).status_code == 409
    fresh = {**_form(svc, path), **body, "expected_revision": str(task["revision"])}
    assert _post(svc, path + "/edit", fresh).status_code == 303
    got = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert (got["title"], got["acceptance_criteria"], got["priority"]) == ("renamed", ["a", "b"], 0)
