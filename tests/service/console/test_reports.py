"""The console's project settings, cost and canary charts, attention digest and session pages,
over the same rules as every console write (Origin, CSRF, key; admins only where it says)."""

from __future__ import annotations

import re

from agentc.core.rules import rfc3339
from agentc.service.work.attention import designate_sender
from tests.service.console.kit import browse_as, form_of, post_form
from tests.service.kit import Caller, Clock, Service, claim

OLGA = "olga's passphrase"


def _operator(svc: Service, *projects: str) -> Caller:
    """Olga, an operator (not an admin) granted the projects."""
    body = {"name": "olga", "role": "operator", "password": OLGA}
    olga = svc.admin.post("/api/v1/admin/people", body)["id"]
    for project in projects:
        grant = {"project_id": project, "role": "operator"}
        svc.admin.post(f"/api/v1/admin/principals/{olga}/projects", grant)
    return svc.login("olga", OLGA)


def _policy_form(svc: Service, path: str, revision: int, **changes: str) -> dict[str, str]:
    return {
        **form_of(svc, path),
        "expected_revision": str(revision),
        "repository_url": "https://git.example/app.git",
        "target_branch": "main",
        "review_mode": "human",
        "lease_seconds": "900",
        "max_attempt_seconds": "0",
        "required_checks": "unit\nlint, 2, ci\n",
        "park_after_attempts": "3",
        **changes,
    }


def test_an_admin_edits_the_policy_and_required_checks(svc: Service) -> None:
    browse_as(svc, svc.admin)
    pid = svc.project(review_mode="agent")
    path = f"/console/projects/{pid}/settings"
    page = svc.client.get(path).text
    assert "Change the policy" in page and "none</dd>" in page  # no required checks yet

    resp = post_form(svc, path, _policy_form(svc, path, 1))
    assert resp.status_code == 303 and resp.headers["location"] == path + "?saved=1"
    policy = svc.admin.get(f"/api/v1/projects/{pid}")["policy"]
    assert (policy["revision"], policy["review_mode"], policy["lease_seconds"]) == (2, "human", 900)
    assert policy["required_checks"] == [
        {"identity": "unit", "version": "1", "environment": "default"},
        {"identity": "lint", "version": "2", "environment": "ci"},
    ]
    page = svc.client.get(path + "?saved=1").text
    assert "The policy was saved." in page
    assert re.search(r'<textarea id="checks"[^>]*>unit\nlint, 2, ci</textarea>', page), page

    # A stale form (revision 1) is refused; so are bad numbers and bad check lines.
    stale = post_form(svc, path, _policy_form(svc, path, 1, review_mode="both"))
    assert stale.status_code == 409 and "revision" in stale.text
    for changes, where in (
        ({"lease_seconds": "soon"}, "lease_seconds"),
        ({"lease_seconds": "5"}, "lease_seconds"),
        ({"required_checks": "a, b, c, d"}, "required_checks: line 1"),
        ({"required_checks": "ok\n, 2"}, "required_checks: line 2"),
        ({"review_mode": "sometimes"}, "review_mode"),
    ):
        resp = post_form(svc, path, _policy_form(svc, path, 2, **changes))
        assert resp.status_code == 422 and where in resp.text, (changes, resp.text)
        assert "Traceback" not in resp.text
    assert svc.admin.get(f"/api/v1/projects/{pid}")["policy"]["revision"] == 2


def test_the_policy_form_needs_an_admin_and_the_csrf_token(svc: Service) -> None:
    pid = svc.project()
    path = f"/console/projects/{pid}/settings"
    browse_as(svc, svc.admin)
    form = _policy_form(svc, path, 1)
    for bad in ({**form, "csrf": ""}, {**form, "csrf": "0" * 64}):
        assert post_form(svc, path, bad).status_code == 403
    assert post_form(svc, path, form, origin="http://evil.example").status_code == 403

    browse_as(svc, _operator(svc, pid))
    page = svc.client.get(path).text
    assert "Only an admin changes the policy." in page and "Change the policy" not in page
    resp = post_form(svc, path, _policy_form(svc, path, 1))
    assert resp.status_code == 403 and "only an admin" in resp.text
    assert svc.admin.get(f"/api/v1/projects/{pid}")["policy"]["revision"] == 1


def test_cost_and_canary_charts_with_their_tables(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid, title="Costly <task>")
    # The host's supervised credential reports the cost of its own agent's attempt.
    attempt = claim(svc.agent(pid, name="alpha-agent"), pid, task)["claim"]["attempt"]
    host = svc.agent(pid, name="alpha-agent", credential_class="supervised", session=False)
    day = 24 * 3600 * 1000
    rows = [
        {"session_id": "a", "attempt_id": attempt["id"], "generation": 1, "usd": 1.5},
        {
            "session_id": "b",
            "task_id": task["id"],
            "usd": 2.25,
            "occurred_at_ms": svc.clock.now - day,
        },
        {"session_id": "c", "usd": None},
    ]
    host.post(f"/api/v1/projects/{pid}/telemetry/cost-rows", {"host": "alpha", "rows": rows})
    body = {"name": "canary-bot", "projects": [pid]}
    token = svc.admin.post("/api/v1/admin/agents", body)["token"]
    canary = Caller(svc.client, {"Authorization": f"Bearer {token}"})
    results = [
        {"harness": "claude", "outcome": "pass", "at_ms": svc.clock.now - day},
        {"harness": "claude", "outcome": "fail", "at_ms": svc.clock.now},
    ]
    canary.post(
        f"/api/v1/projects/{pid}/telemetry/canary-results", {"host": "beta", "rows": results}
    )

    browse_as(svc, _operator(svc, pid))  # any person of the project reads the charts
    page = svc.client.get(f"/console/projects/{pid}/costs").text
    for key, title in (
        ("cost-day", "Cost per day"),
        ("cost-task", "Cost per task"),
        ("cost-host", "Cost per host"),
        ("canary-day", "Canary results per day"),
    ):
        svg = re.search(
            rf'<svg[^>]*aria-labelledby="{key}-title {key}-desc"[^>]*>(.*?)</svg>', page, re.S
        )
        assert svg, key
        assert f'<title id="{key}-title">{title}</title>' in svg.group(1)
        assert f'<desc id="{key}-desc">' in svg.group(1)
        assert f"<caption>{title}</caption>" in page  # the same numbers as a table
    assert "$3.75 in all from 3 cost rows (1 without a price)" in page
    assert '<th scope="row">Costly &lt;task&gt;</th><td>$3.75</td><td>2</td>' in page
    assert '<th scope="row">alpha</th><td>$3.75</td><td>3</td>' in page
    assert "1 passed, 1 failed" in page
    assert re.search(r'<td>beta</td><td>claude</td><td class="error">fail</td>', page)
    assert "<task>" not in page  # escaped everywhere, the SVG included


def test_the_attention_page_shows_the_digest_and_its_sender(svc: Service) -> None:
    pid = svc.project(review_mode="human")
    hidden = svc.project(name="not-olgas")
    worker = svc.agent(pid)
    task = svc.task(pid, kind="general", title="Review me")
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    worker.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/submissions",
        {
            "generation": attempt["generation"],
            "kind": "general",
            "summary": "s",
            "acceptance_evidence": [{"criterion": "it works", "evidence": "yes"}],
        },
    )
    svc.agent(pid, name="digest-bot", session=False)
    svc.executor.write(lambda tx: designate_sender(tx.conn, tx.now, pid, "digest-bot"))
    browse_as(svc, _operator(svc, pid))
    for path in ("/console/attention", f"/console/projects/{pid}/attention"):
        page = svc.client.get(path).text
        assert "Waiting for a human review" in page and "Review me" in page, path
        assert '<strong class="sender">digest-bot</strong>' in page
        assert "not-olgas" not in page  # only the projects she is granted
    assert svc.client.get(f"/console/projects/{hidden}/attention").status_code == 404


def test_only_a_person_opening_the_project_s_digest_records_a_read(
    svc: Service, clock: Clock
) -> None:
    pid = svc.project()
    bot = svc.agent(pid, name="digest-bot", session=False)
    svc.executor.write(lambda tx: designate_sender(tx.conn, tx.now, pid, "digest-bot"))
    # Neither the agent's read over the API, a person's over the API, nor the page of all
    # projects is a read of this digest.
    assert svc.admin.get(f"/api/v1/projects/{pid}/attention")["last_read"] is None
    olga = _operator(svc, pid)
    browse_as(svc, olga)
    assert "never read" in svc.client.get("/console/attention").text
    assert bot.get(f"/api/v1/projects/{pid}/attention")["last_read"] is None
    browse_as(svc, olga)
    clock.advance(60)
    page = svc.client.get(f"/console/projects/{pid}/attention").text
    assert "never read" in page  # the page shows the read before this one
    read = bot.get(f"/api/v1/projects/{pid}/attention")["last_read"]
    assert read == {"at": rfc3339(clock.now), "by": "olga", "via": "console"}
    clock.advance(60)
    browse_as(svc, olga)
    assert "by olga (this page)" in svc.client.get(f"/console/projects/{pid}/attention").text
    assert bot.get(f"/api/v1/projects/{pid}/attention")["last_read"]["at"] == rfc3339(clock.now)
    kinds = [e["kind"] for e in svc.admin.get(f"/api/v1/projects/{pid}/events")["items"]]
    assert kinds.count("digest_read") == 2


def test_sessions_are_ended_one_at_a_time_from_access_and_my_account(svc: Service) -> None:
    operator = _operator(svc)
    phone, laptop = svc.login("olga", OLGA), svc.login("admin", "correct horse battery staple")
    phone_id = next(s["id"] for s in phone.get("/api/v1/browser-sessions")["items"] if s["current"])
    browse_as(svc, svc.admin)
    page = svc.client.get("/console/access").text
    ends = re.findall(r'action="/console/sessions/([^/"]+)/end"', page)
    assert len(ends) == 3 and "this session" in page  # olga twice and the admin's laptop
    assert phone_id in ends

    form = {**form_of(svc), "back": "access"}
    end_phone = f"/console/sessions/{phone_id}/end"
    assert post_form(svc, end_phone, {**form, "csrf": ""}).status_code == 403
    assert post_form(svc, end_phone, form, origin=None).status_code == 403
    assert phone.raw("GET", "/api/v1/me").status_code == 200
    browse_as(svc, svc.admin)
    resp = post_form(svc, end_phone, form)
    assert resp.status_code == 303 and resp.headers["location"] == "/console/access"
    assert phone.raw("GET", "/api/v1/me").status_code == 401  # refused at once
    browse_as(svc, phone)
    assert svc.client.get("/console/account", follow_redirects=False).status_code == 303

    # Olga ends her own other session from My account, and cannot end the admin's. (A
    # Caller's request puts its own cookie in the client's jar: browse_as before each page.)
    two = svc.login("olga", OLGA)
    two_id = next(s["id"] for s in two.get("/api/v1/browser-sessions")["items"] if s["current"])
    laptop_id = next(
        s["id"] for s in laptop.get("/api/v1/browser-sessions")["items"] if s["current"]
    )
    browse_as(svc, operator)
    page = svc.client.get("/console/account").text
    mine = re.findall(r'action="/console/sessions/([^/"]+)/end"', page)
    assert mine == [two_id] and "this session (sign out to end it)" in page
    resp = post_form(svc, f"/console/sessions/{two_id}/end", form_of(svc, "/console/account"))
    assert resp.headers["location"] == "/console/account?changed=session"
    assert "The session was ended." in svc.client.get(resp.headers["location"]).text
    resp = post_form(svc, f"/console/sessions/{laptop_id}/end", form_of(svc, "/console/account"))
    assert resp.status_code == 404
    assert "Browser sessions" not in svc.client.get("/console/access").text  # admins only
    assert two.raw("GET", "/api/v1/me").status_code == 401
    assert laptop.raw("GET", "/api/v1/me").status_code == 200
