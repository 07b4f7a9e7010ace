"""Every route of the app, walked by callers of another project: nothing of project B reaches
them. The routes are enumerated from the app itself, so a new route is walked (or, when it
has a path parameter the walk does not know, the walk fails until it is taught)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts

from agentc.service.work.attention import designate_sender
from tests.service.kit import Caller, Service, claim, submit_general

# Path parameters that name a record of one project: a route naming one must also name the
# project (`{project_id}`), which is what the service checks the caller's grant against.
PROJECT_RECORDS = ("project_id", "task_id", "attempt_id", "activity_id", "submission_id")
# Path parameters that name nothing of a project: the answer must not depend on whether the
# id is project B's or made up.
OTHER_PARAMETERS = ("session_id", "credential_id", "principal_id", "name", "action", "token")
MADE_UP = "00000000-0000-4000-8000-00000000beef"


@dataclass
class World:
    """One project's records, as ids for the walk's path parameters."""

    ids: dict[str, str]
    secrets: tuple[str, ...]  # strings only someone who reaches the project may see


def _world(svc: Service, name: str) -> World:
    pid = svc.project(name=name, review_mode="agent")
    task = svc.task(pid, title=f"the task of {name}", kind="general")
    worker = svc.agent(pid)
    attempt = claim(worker, pid, task)["claim"]["attempt"]
    submitted = submit_general(worker, pid, attempt)
    detail = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    [activity] = detail["workflow"]["activities"]
    ids = {
        "project_id": pid,
        "task_id": task["id"],
        "attempt_id": attempt["id"],
        "activity_id": activity["id"],
        "submission_id": submitted["submission"]["id"],
        "session_id": worker.headers["X-Coordinator-Session"],
        "credential_id": worker.issued["credential_id"],
        "principal_id": worker.issued["agent_id"],
        "name": "console.css",
        "action": "disable",
        "token": "not-a-digest-link",  # a mailed digest's read link (none is valid here)
    }
    secret_ids = [v for k, v in ids.items() if k not in ("name", "action", "token")]
    return World(ids, (name, f"the task of {name}", *secret_ids))


def _routes(svc: Service) -> list[tuple[str, str]]:
    """Every (method, path) the app routes, included routers flattened."""
    found = []
    for route in iter_route_contexts(svc.app.routes):
        assert route.path is not None and route.methods is not None, route
        found += [(m, route.path) for m in sorted(route.methods) if m != "HEAD"]
    return found


def _params(path: str) -> list[str]:
    return re.findall(r"{(\w+)}", path)


def _fill(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"{(\w+)}", lambda m: ids[m.group(1)], path)


def _call(caller: Caller, method: str, path: str) -> Any:
    body: dict[str, Any] | None = None if method == "GET" else {}
    return caller.raw(method, path, body, headers={"Accept": "application/json"})


def _code(resp: Any) -> str | None:
    if resp.headers.get("content-type", "").startswith("application/json"):
        error = resp.json().get("error") if isinstance(resp.json(), dict) else None
        return error.get("code") if isinstance(error, dict) else None
    return None


@pytest.fixture
def worlds(svc: Service) -> tuple[World, World]:
    return _world(svc, "project-a"), _world(svc, "project-b")


def test_every_route_hides_another_project(svc: Service, worlds: tuple[World, World]) -> None:
    a, b = worlds
    agent = svc.agent(a.ids["project_id"])  # an agent of project A, with a session
    person = svc.person(a.ids["project_id"])  # an operator of project A
    # Console pages and forms are for people (an agent's bearer token is no console session);
    # the person's forms carry no CSRF token, so nothing the walk sends can change anything.
    operator = Caller(svc.client, cookies=person.cookies)
    made_up = {k: (v if k in ("name", "action") else MADE_UP) for k, v in b.ids.items()}
    routes = _routes(svc)
    assert len(routes) >= 50, routes  # the enumeration found the app's routes
    walked = 0
    for method, template in routes:
        params = _params(template)
        unknown = [p for p in params if p not in PROJECT_RECORDS + OTHER_PARAMETERS]
        assert not unknown, f"{method} {template}: teach the walk the parameters {unknown}"
        caller = operator if not template.startswith("/api/") else agent
        path = _fill(template, b.ids)
        resp = _call(caller, method, path)
        where = f"{method} {template} -> {resp.status_code} {resp.text[:300]}"
        if any(p in PROJECT_RECORDS for p in params):
            assert "project_id" in params, f"{where}: a project's record outside its project"
            assert resp.status_code == 404, where
            if template.startswith("/api/"):
                assert _code(resp) == "project_not_found", where
        else:
            # The same answer for project B's ids as for made-up ones: ids tell nothing.
            other = _call(caller, method, _fill(template, made_up))
            assert (resp.status_code, _code(resp)) == (other.status_code, _code(other)), where
        echoed = set(re.findall(r"[\w.-]+", path))
        leaked = [s for s in b.secrets if s not in echoed and s in resp.text]
        assert not leaked, f"{where}: leaks {leaked}"
        walked += 1
    assert walked == len(routes)


def test_reads_reach_the_own_project_and_only_its_records(
    svc: Service, worlds: tuple[World, World]
) -> None:
    """The walk's control: the same reads in project A answer, and project A's paths with
    project B's records do not."""
    a, b = worlds
    agent = svc.agent(a.ids["project_id"])
    person = svc.person(a.ids["project_id"])
    # The attention digest is read by an agent only when it is the designated sender.
    name = agent.get("/api/v1/me")["actor"]["name"]
    svc.executor.write(lambda tx: designate_sender(tx.conn, tx.now, a.ids["project_id"], name))
    reads = [(m, t) for m, t in _routes(svc) if m == "GET" and "{project_id}" in t]
    assert len(reads) >= 8, reads
    for _method, template in reads:
        caller = agent if template.startswith("/api/") else person
        ok = caller.raw("GET", _fill(template, a.ids))
        # The general task's attempt recorded no artifact and its activity is a review, which
        # has no landing's provenance: reached, absent.
        if "/artifacts/" in template or template.endswith("/provenance"):
            assert (ok.status_code, _code(ok)) == (404, "record_not_found"), template
        elif template.endswith("/known-secrets"):  # reached; only an integrator may ask
            assert (ok.status_code, _code(ok)) == (403, "operation_not_permitted"), template
        else:
            assert ok.status_code == 200, f"{template}: {ok.status_code} {ok.text[:300]}"
        crossed = {**b.ids, "project_id": a.ids["project_id"]}
        if len(_params(template)) > 1:
            resp = caller.raw("GET", _fill(template, crossed))
            assert resp.status_code == 404, f"{template}: {resp.status_code} {resp.text[:300]}"
    listed = agent.get("/api/v1/projects")["items"]
    assert [p["id"] for p in listed] == [a.ids["project_id"]]
    assert "project-b" not in person.raw("GET", "/console/projects").text
    everything = svc.admin.get("/api/v1/projects")["items"]  # an admin has every project
    assert {p["id"] for p in everything} == {a.ids["project_id"], b.ids["project_id"]}
