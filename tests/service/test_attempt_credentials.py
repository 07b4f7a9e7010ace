"""Attempt credentials: a launch's only credential, minted for one attempt by the session holding
it. Every sentence of docs/security.md's "What a launch can do" is checked here against the real
service: what the credential may do, every other route of the app refused, and the credential
dead the moment its attempt ends, however it ends."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts

from agentc.core.model import CHECKPOINTS_PER_ATTEMPT_MAX, CredentialClass
from agentc.service.attempt_scope import AttemptScope
from agentc.service.auth import hash_password, verifier
from agentc.store.accounts import Credential
from agentc.store.sql import fetch_row, insert
from tests.service.kit import ApiError, Caller, Service, claim, submit_general

MADE_UP = "00000000-0000-4000-8000-00000000beef"


@dataclass
class Launch:
    """A task claimed by a supervisor-like agent session, and the credential minted for it."""

    pid: str
    task: dict[str, Any]
    attempt: dict[str, Any]
    loop: Caller  # the role's credential with the claiming session (the supervisor's view)
    agent: Caller  # the attempt credential alone (the launch's view)
    minted: dict[str, Any]

    @property
    def base(self) -> str:
        return f"/api/v1/projects/{self.pid}"

    @property
    def at(self) -> str:
        return f"{self.base}/attempts/{self.attempt['id']}"


def mint(caller: Caller, pid: str, attempt: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = caller.post(
        f"/api/v1/projects/{pid}/attempts/{attempt['id']}/credentials",
        {"generation": attempt["generation"]},
    )
    return data


def launch(svc: Service, pid: str | None = None, **task: Any) -> Launch:
    pid = pid or svc.project(review_mode="none")
    row = svc.task(pid, **{"kind": "general", **task})
    loop = svc.agent(pid, name=f"impl-{row['id'][:8]}", credential_class="supervised")
    attempt = claim(loop, pid, row)["claim"]["attempt"]
    minted = mint(loop, pid, attempt)
    agent = Caller(svc.client, {"Authorization": f"Bearer {minted['token']}"})
    return Launch(pid, row, attempt, loop, agent, minted)


def refused(caller: Caller, method: str, path: str, body: Any = None) -> tuple[int, str]:
    resp = caller.raw(method, path, body if method != "GET" else None)
    assert resp.status_code >= 400, f"{method} {path}: {resp.status_code} {resp.text[:300]}"
    return resp.status_code, resp.json()["error"]["code"]


def checkpoint(caller: Caller, run: Launch, summary: str = "working") -> Any:
    return caller.post(
        f"{run.at}/checkpoints", {"generation": run.attempt["generation"], "summary": summary}
    )


def test_the_credential_does_its_attempts_work_in_the_attempts_session(svc: Service) -> None:
    run = launch(svc)
    assert run.minted["attempt_id"] == run.attempt["id"]
    session = run.loop.headers["X-Coordinator-Session"]
    # It reads its task, the task's workflow, its attempt and its session...
    assert run.agent.get(f"{run.base}/tasks/{run.task['id']}")["id"] == run.task["id"]
    assert run.agent.get(f"{run.base}/tasks/{run.task['id']}/workflow") is not None
    assert run.agent.get(run.at)["attempt"]["id"] == run.attempt["id"]
    view = run.agent.get(f"/api/v1/sessions/{session}")
    assert [h["attempt_id"] for h in view["held_attempts"]] == [run.attempt["id"]]
    # ...checkpoints in the attempt's session (no session headers of its own)...
    checkpoint(run.agent, run)
    detail = run.loop.get(run.at)
    assert detail["last_checkpoint"]["summary"] == "working"
    # ...and submits. The audit trail names the attempt credential's class.
    submit_general(run.agent, run.pid, run.attempt)
    assert run.loop.get(run.at)["attempt"]["state"] == "submitted"
    events = svc.admin.get(f"{run.base}/events?limit=100")["items"]
    [submitted] = [e for e in events if e["kind"] == "submission.created"]
    assert submitted["credential_class"] == CredentialClass.ATTEMPT.value


def test_the_token_is_kept_only_as_a_verifier_and_shown_once(svc: Service) -> None:
    run = launch(svc)
    stored = svc.executor.read(
        lambda tx: fetch_row(tx.conn, Credential, run.minted["credential_id"])
    )
    assert stored is not None and stored.attempt_id == run.attempt["id"]
    assert run.minted["token"] not in repr(stored)
    assert stored.class_ == CredentialClass.ATTEMPT.value
    # A replay of the mint answers without the token.
    path = f"{run.at}/credentials"
    body = {"generation": run.attempt["generation"]}
    first = run.loop.post(path, body, key="mint-once")
    again = run.loop.post(path, body, key="mint-once")
    assert "token" in first and "token" not in again and again["secret_unavailable"] is True
    # Attempt credentials are not listed with the agents' credentials on the Access page.
    page = svc.admin.raw("GET", "/console/access").text
    assert run.minted["credential_id"] not in page
    assert run.loop.issued["credential_id"] in page


def _routes(svc: Service) -> list[tuple[str, str]]:
    found = []
    for route in iter_route_contexts(svc.app.routes):
        assert route.path is not None and route.methods is not None, route
        found += [(m, route.path) for m in sorted(route.methods) if m != "HEAD"]
    return found


def _fill(template: str, ids: dict[str, str]) -> str:
    return re.sub(r"{(\w+)}", lambda m: ids[m.group(1)], template)


def test_every_other_route_of_the_app_is_refused(svc: Service) -> None:
    """Every route the app has, with this launch's own ids and with another task's, another
    attempt's and another project's: only the scope's requests pass, nothing else does (403
    before any route's work runs, so the answer says nothing about other records)."""
    run = launch(svc)
    other = launch(svc, run.pid)  # another launch in the same project, same kind of agent
    elsewhere = launch(svc)  # and in another project
    session = run.loop.headers["X-Coordinator-Session"]
    own = {
        "project_id": run.pid,
        "task_id": run.task["id"],
        "attempt_id": run.attempt["id"],
        "session_id": session,
        "activity_id": MADE_UP,
        "submission_id": MADE_UP,
        "credential_id": run.minted["credential_id"],
        "principal_id": run.loop.issued["agent_id"],
        "name": "console.css",
        "action": "disable",
        "token": "not-a-digest-link",
    }
    variants = [
        own,
        {**own, "task_id": other.task["id"], "attempt_id": other.attempt["id"]},
        {**own, "session_id": other.loop.headers["X-Coordinator-Session"]},
        {**own, "project_id": elsewhere.pid, "task_id": elsewhere.task["id"]},
        {**own, "project_id": elsewhere.pid, "attempt_id": elsewhere.attempt["id"]},
    ]
    allowed = AttemptScope(run.pid, run.task["id"], run.attempt["id"], session).routes()
    routes = _routes(svc)
    assert len(routes) >= 50
    passed = set()
    for method, template in routes:
        for ids in variants:
            path = _fill(template, ids)
            route = f"{method} {path}"
            if route in allowed:
                passed.add(route)
                continue
            body: dict[str, Any] | None = None if method == "GET" else {}
            resp = run.agent.raw(method, path, body, headers={"Accept": "application/json"})
            where = f"{route} -> {resp.status_code} {resp.text[:200]}"
            anonymous = svc.anonymous().raw(method, path, body).status_code
            if not path.startswith("/api/"):
                # The console: a bearer token is no console session (the sign-in page, as for
                # anyone, or a refusal); its static files and /healthz are public.
                assert resp.status_code >= 300 or anonymous < 300, where
                continue
            if anonymous != 401:
                continue  # public (info, the API schema, sign-in): no credential is read
            assert resp.status_code == 403, where
            assert resp.json()["error"]["code"] == "operation_not_permitted", where
            assert run.attempt["id"] in resp.json()["error"]["message"], where
    assert passed == allowed  # every request of the scope is a route of the app
    # The launch's work was untouched by the walk.
    assert run.loop.get(run.at)["attempt"]["state"] == "active"


@pytest.mark.parametrize(
    ("what", "method", "path", "body"),
    [
        ("open a session of its own", "POST", "/api/v1/sessions", {"harness": "x"}),
        ("claim", "POST", "{base}/claims", {"task_id": "{other_task}"}),
        ("file a task", "POST", "{base}/tasks", {"title": "t", "acceptance_criteria": ["a"]}),
        ("renew its own lease", "POST", "{at}/renew", {"generation": 1}),
        ("register a checkout", "POST", "{at}/checkout", {"generation": 1}),
        ("mint another credential", "POST", "{at}/credentials", {"generation": 1}),
        ("revoke", "POST", "{at}/credentials/revoke", {"generation": 1}),
        ("list the project's tasks", "GET", "{base}/tasks", None),
        ("ask for the next task", "GET", "{base}/next", None),
        ("read another task", "GET", "{base}/tasks/{other_task}", None),
        ("read who it is and its grants", "GET", "/api/v1/me", None),
        ("report a cost row", "POST", "{base}/telemetry/cost-rows", {"host": "h", "rows": []}),
        ("close the loop's session", "POST", "/api/v1/sessions/{session}/close", {}),
    ],
)
def test_what_a_launch_cannot_do(
    svc: Service, what: str, method: str, path: str, body: Any
) -> None:
    run = launch(svc)
    other = svc.task(run.pid, kind="general")
    values = {
        "base": run.base,
        "at": run.at,
        "other_task": other["id"],
        "session": run.loop.headers["X-Coordinator-Session"],
    }

    def filled(text: str) -> str:
        return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], text)

    body = {k: filled(v) if isinstance(v, str) else v for k, v in (body or {}).items()}
    status, code = refused(run.agent, method, filled(path), body if method != "GET" else None)
    assert (status, code) == (403, "operation_not_permitted"), what
    assert run.loop.get(run.at)["attempt"]["state"] == "active"


def test_an_attempt_credential_is_never_issued_rotated_or_unbound(svc: Service) -> None:
    run = launch(svc)
    with pytest.raises(ApiError) as err:
        svc.admin.post("/api/v1/admin/agents", {"name": "x", "credential_class": "attempt"})
    assert (err.value.status, err.value.code) == (422, "invalid_input")
    with pytest.raises(ApiError) as err:
        svc.admin.post(f"/api/v1/admin/credentials/{run.minted['credential_id']}/rotate")
    assert (err.value.status, err.value.code) == (409, "attempt_credential")
    # A row of class attempt bound to nothing (none is made so) authenticates nothing.
    token = "f" * 64
    row = Credential(
        "unbound", run.loop.issued["agent_id"], verifier(token), "unbound", "attempt", "write",
        None, 0, None,
    )  # fmt: skip
    svc.executor.write(lambda tx: insert(tx.conn, row))
    unbound = Caller(svc.client, {"Authorization": f"Bearer {token}"})
    assert refused(unbound, "GET", f"{run.base}/tasks") == (401, "authentication_required")


def test_an_attempt_records_a_bounded_number_of_checkpoints(svc: Service) -> None:
    run = launch(svc)
    for n in range(CHECKPOINTS_PER_ATTEMPT_MAX):
        checkpoint(run.agent, run, f"step {n}")
    with pytest.raises(ApiError) as err:
        checkpoint(run.agent, run, "one too many")
    assert (err.value.status, err.value.code) == (409, "checkpoint_limit")
    # The attempt goes on: it can still submit.
    submit_general(run.agent, run.pid, run.attempt)


def _dead(run: Launch) -> None:
    """Every request of the scope is 401 now, reads included."""
    for method, path, body in (
        ("GET", run.at, None),
        ("GET", f"{run.base}/tasks/{run.task['id']}", None),
        ("POST", f"{run.at}/checkpoints", {"generation": 1, "summary": "late"}),
        ("POST", f"{run.base}/telemetry/cost-rows", {"host": "h", "rows": []}),
        ("POST", f"{run.at}/release", {"generation": 1, "handoff": "late"}),
    ):
        status, code = refused(run.agent, method, path, body)
        assert (status, code) == (401, "authentication_required"), (method, path)


def test_dead_once_submitted(svc: Service) -> None:
    run = launch(svc)
    submit_general(run.agent, run.pid, run.attempt)
    _dead(run)
    message = run.agent.raw("GET", run.at).json()["error"]["message"]
    assert "has ended (submitted)" in message


def test_dead_once_released_by_the_agent_or_the_loop(svc: Service) -> None:
    for releaser in ("agent", "loop"):
        run = launch(svc)
        who = run.agent if releaser == "agent" else run.loop
        who.post(f"{run.at}/release", {"generation": 1, "handoff": "stopping"})
        _dead(run)


def test_dead_once_the_lease_lapses(svc: Service) -> None:
    run = launch(svc)
    checkpoint(run.agent, run)
    svc.clock.advance(3600 * 24)
    _dead(run)
    assert "(lapsed)" in run.agent.raw("GET", run.at).json()["error"]["message"]


def test_dead_once_revoked_though_the_attempt_goes_on(svc: Service) -> None:
    run = launch(svc)
    out = run.loop.post(f"{run.at}/credentials/revoke", {"generation": 1})
    assert out["revoked"] == 1
    _dead(run)
    # The loop still holds the attempt with its own credential and session.
    assert run.loop.get(run.at)["attempt"]["state"] == "active"
    checkpoint(run.loop, run, "the loop goes on")
    # Revoking again is harmless.
    assert run.loop.post(f"{run.at}/credentials/revoke", {"generation": 1})["revoked"] == 0


def test_dead_once_the_role_credential_is_revoked_or_the_agent_disabled(svc: Service) -> None:
    run = launch(svc)
    svc.admin.post(f"/api/v1/admin/credentials/{run.loop.issued['credential_id']}/revoke")
    _dead(run)  # revoking the role's credential closed its sessions, the attempt's among them
    run = launch(svc)
    svc.admin.post(f"/api/v1/admin/principals/{run.loop.issued['agent_id']}/disable")
    status, code = refused(run.agent, "GET", run.at)
    assert (status, code) == (401, "authentication_required")


def test_it_presents_no_session_of_its_own(svc: Service) -> None:
    run = launch(svc)
    other = launch(svc, run.pid)
    for headers in (
        {"X-Coordinator-Session": run.loop.headers["X-Coordinator-Session"]},
        {
            "X-Coordinator-Session": other.loop.headers["X-Coordinator-Session"],
            "X-Coordinator-Session-Proof": other.loop.headers["X-Coordinator-Session-Proof"],
        },
    ):
        resp = run.agent.raw("GET", run.at, headers=headers)
        assert resp.status_code == 401, resp.text
        assert "carries its attempt's session" in resp.json()["error"]["message"]


def test_who_may_mint_and_revoke(svc: Service) -> None:
    pid = svc.project(review_mode="agent")
    row = svc.task(pid, kind="general")
    loop = svc.agent(pid, name="impl", credential_class="supervised")
    attempt = claim(loop, pid, row)["claim"]["attempt"]
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"

    def refusal(caller: Caller, path: str, generation: int = 1) -> tuple[int, str]:
        with pytest.raises(ApiError) as err:
            caller.post(f"{at}/{path}", {"generation": generation})
        return err.value.status, str(err.value.code)

    # Only the session holding the attempt mints, at the attempt's generation.
    assert refusal(svc.agent(pid), "credentials") == (403, "operation_not_permitted")
    again = Caller(svc.client, {"Authorization": loop.headers["Authorization"]})
    s = again.post("/api/v1/sessions", {"harness": "x"})
    again.headers.update(
        {"X-Coordinator-Session": s["session_id"], "X-Coordinator-Session-Proof": s["proof"]}
    )
    assert refusal(again, "credentials") == (403, "operation_not_permitted")
    assert refusal(loop, "credentials", generation=2) == (409, "lease_expired")
    integrator = svc.agent(pid, credential_class="integrator", session=False)
    assert refusal(integrator, "credentials")[0] == 403
    for _ in range(4):
        mint(loop, pid, attempt)
    assert refusal(loop, "credentials") == (409, "too_many_attempt_credentials")
    # Revoking: the attempt's own agent (any of its non-attempt credentials) or an admin.
    assert refusal(svc.agent(pid), "credentials/revoke") == (403, "operation_not_permitted")
    assert again.post(f"{at}/credentials/revoke", {"generation": 1})["revoked"] == 4
    mint(loop, pid, attempt)
    assert svc.admin.post(f"{at}/credentials/revoke", {"generation": 1})["revoked"] == 1
    # A review attempt gets none: reviewer launches never reach the coordinator.
    sub = submit_general(loop, pid, attempt)
    reviewer = svc.agent(pid, credential_class="supervised")
    activity = next(a for a in sub["activities"] if a["kind"] == "agent_review")["id"]
    review = reviewer.post(
        f"/api/v1/projects/{pid}/workflow-activities/{activity}/claim",
        {"expected_submission_id": sub["submission"]["id"]},
    )
    with pytest.raises(ApiError) as err:
        mint(reviewer, pid, review["attempt"])
    assert err.value.code == "attempt_credential_not_allowed"


def test_a_launch_credential_cannot_reach_another_project_its_agent_is_granted(
    svc: Service,
) -> None:
    """The role's principal reaches two projects; its attempt credential only its attempt's."""
    run = launch(svc)
    second = svc.project(review_mode="none")
    svc.grant(run.loop, second)
    assert run.loop.get(f"/api/v1/projects/{second}")["id"] == second
    for path in (f"/api/v1/projects/{second}", f"/api/v1/projects/{second}/tasks"):
        assert refused(run.agent, "GET", path) == (403, "operation_not_permitted")


def test_no_password_is_hashed_for_a_caller_who_may_not_add_people(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Argon2 hash is the costly part of adding a person or changing a password: it runs only
    after the caller was checked, so a launch's credential (or anyone) cannot make the service
    hash for it."""
    from agentc.service import routes_access
    from agentc.service.console import forms

    hashed: list[str] = []
    real = hash_password

    def counting(password: str) -> str:
        hashed.append(password)
        return real(password)

    run = launch(svc)
    operator = svc.person(run.pid)
    agent = svc.agent(run.pid)
    monkeypatch.setattr(routes_access, "hash_password", counting)
    monkeypatch.setattr(forms, "hash_password", counting)
    body = {"name": "newcomer", "role": "operator", "password": "x" * 16}
    for caller in (run.agent, agent, operator, svc.anonymous()):
        resp = caller.raw("POST", "/api/v1/admin/people", body)
        assert resp.status_code in (401, 403), resp.text
    form = {"name": "newcomer", "role": "operator", "password": "x" * 16}
    resp = svc.client.post("/console/access/people", data=form, follow_redirects=False)
    assert resp.status_code in (303, 401, 403), resp.text
    assert hashed == []
    svc.admin.post("/api/v1/admin/people", body)  # an admin's request is hashed, once
    assert len(hashed) == 1
