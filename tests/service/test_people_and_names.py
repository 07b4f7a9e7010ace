"""Who may create projects, what a refusal tells, who sees whom on the Access page, and names
that differ only in case: the API, the console and the host commands agree."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from agentc.core.model import PrincipalKind, PrincipalRole
from agentc.service.work.accounts import _add_principal
from tests.service.console.kit import browse_as, form_of, post_form
from tests.service.kit import ADMIN_PASSWORD, ApiError, Caller, Service


def refusal(caller: Caller, body: dict[str, str]) -> tuple[int, str, str]:
    with pytest.raises(ApiError) as err:
        caller.post("/api/v1/projects", body)
    return err.value.status, err.value.code, err.value.body["error"]["message"]


def test_only_admins_create_projects_and_a_refusal_tells_nothing(svc: Service) -> None:
    mine = svc.project()
    svc.admin.post("/api/v1/projects", {"name": "secret-plans", "repository_url": "https://x/y"})
    operator = svc.person(mine)
    viewer = svc.person(mine, project_role="viewer")
    agent = svc.agent(mine)
    fresh = {"name": "brand-new", "repository_url": "https://x/y"}
    taken = {"name": "secret-plans", "repository_url": "https://x/y"}
    for caller in (operator, viewer, agent):
        # A name in use (in a project the caller cannot see) is refused exactly as a new one.
        answer = refusal(caller, fresh)
        assert answer[:2] == (403, "operation_not_permitted"), answer
        assert refusal(caller, taken) == answer
    names = svc.executor.read(
        lambda tx: [r[0] for r in tx.conn.exec_driver_sql("SELECT name FROM projects").all()]
    )
    assert "brand-new" not in names
    # The console's form refuses it too (the form is shown to admins only).
    browse_as(svc, operator)
    assert "New project" not in svc.client.get("/console/projects").text
    page = post_form(svc, "/console/projects", {**form_of(svc, "/console/projects"), **fresh})
    assert page.status_code == 403 and "only an admin may create projects" in page.text
    # An admin sees every project, so "exists" tells them nothing they cannot see.
    with pytest.raises(ApiError) as err:
        svc.admin.post("/api/v1/projects", taken)
    assert err.value.status == 409


def test_the_access_page_lists_people_and_agents_to_admins_only(svc: Service) -> None:
    pid = svc.project()
    svc.agent(pid, name="build-bot")
    operator = svc.person(pid)
    viewer = svc.person(pid, project_role="viewer")
    me = operator.get("/api/v1/me")["actor"]["name"]
    browse_as(svc, operator)
    page = svc.client.get("/console/access").text
    assert f'data-principal="{me}"' in page
    viewer_name = viewer.get("/api/v1/me")["actor"]["name"]
    for other in ("admin", "build-bot", viewer_name):
        assert f'data-principal="{other}"' not in page and f"<td>{other}</td>" not in page
    assert page.count("data-principal=") == 1
    browse_as(svc, svc.admin)
    everyone = svc.client.get("/console/access").text
    for name in ("admin", "build-bot", viewer_name, me):
        assert f'data-principal="{name}"' in everyone


def test_names_are_unique_without_regard_to_case(svc: Service) -> None:
    person = {"name": "admin2", "role": "operator", "password": ADMIN_PASSWORD}
    svc.admin.post("/api/v1/admin/people", person)
    svc.admin.post("/api/v1/admin/agents", {"name": "Bot"})
    for path, body in (
        ("/api/v1/admin/people", {**person, "name": "ADMIN2"}),
        ("/api/v1/admin/people", {**person, "name": "Admin"}),
        ("/api/v1/admin/people", {**person, "name": "bot"}),
        ("/api/v1/admin/agents", {"name": "BOT"}),
        ("/api/v1/admin/agents", {"name": "Admin2"}),
    ):
        with pytest.raises(ApiError) as err:
            svc.admin.post(path, body)
        assert err.value.status == 409, body
        assert "differs only in case" in err.value.body["error"]["message"], err.value.body
    # The console's form says the same.
    browse_as(svc, svc.admin)
    fields = {**form_of(svc), "name": "ADMIN2", "role": "operator", "password": ADMIN_PASSWORD}
    page = post_form(svc, "/console/access/people", fields)
    assert page.status_code == 409 and "differs only in case" in page.text
    # The host's issue-credential too, and nothing is written.
    out = svc.host("issue-credential", "--agent", "bOT")
    assert out.returncode == 2 and "differs only in case" in out.stderr, out
    names = svc.executor.read(
        lambda tx: sorted(r[0] for r in tx.conn.exec_driver_sql("SELECT name FROM principals"))
    )
    assert names == ["Bot", "admin", "admin2"]
    # The database refuses such a pair whatever writes it.
    with pytest.raises(IntegrityError):
        svc.executor.write(
            lambda tx: _add_principal(
                tx.conn, tx.now, "ADMIN2", PrincipalKind.HUMAN, PrincipalRole.OPERATOR, None
            )
        )
    # A name signs in without regard to case: it names one account.
    signed = svc.login("ADMIN2", ADMIN_PASSWORD)
    assert signed.get("/api/v1/me")["actor"]["name"] == "admin2"
    # The same name again is still "taken" (not a case clash).
    with pytest.raises(ApiError) as err:
        svc.admin.post("/api/v1/admin/people", person)
    assert err.value.status == 409 and "is taken" in err.value.body["error"]["message"]
