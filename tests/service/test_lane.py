"""The lease lane answers well-formed lease requests without FastAPI, and every other request
gets exactly the answer it gets without the lane."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from agentc.core.body import read_body
from agentc.core.errors import CoordinatorError
from agentc.service import routes_work
from agentc.service.app import create_app
from agentc.service.lane import LeaseLane, lane_route
from tests.service.kit import ORIGIN, ApiError, Caller, Service, claim

# --- the lane alone, with a stand-in application behind it ---------------------------------


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generation: int


class Behind:
    """The application behind the lane: records what reached it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(receive)
        assert body is not None
        self.seen.append((scope["path"], body))
        await Response(b"behind", status_code=299)(scope, receive, send)


async def _endpoint(request: Request, body: Body, project_id: str, thing_id: str) -> Response:
    if body.generation == 13:
        raise CoordinatorError("lease_expired", "unlucky", status=409)
    if body.generation == 14:
        raise RuntimeError("a bug")
    return JSONResponse({"project": project_id, "thing": thing_id, "g": body.generation})


def _lane() -> tuple[LeaseLane, Behind]:
    behind = Behind()
    route = lane_route("POST", "/p/{project_id}/things/{thing_id}/go", Body, _endpoint)
    return LeaseLane(behind, [route]), behind


def _call(
    lane: LeaseLane,
    path: str,
    body: bytes,
    *,
    method: str = "POST",
    content_type: bytes | None = b"application/json",
    chunks: int = 1,
    leave: bool = False,
) -> tuple[list[Message], bool]:
    """Drive the lane with one request; returns what it sent and whether it asked for more."""

    clock = SimpleNamespace(clock=lambda: 1_790_000_000_000)
    app = SimpleNamespace(state=SimpleNamespace(runtime=SimpleNamespace(executor=clock)))
    headers = [(b"content-type", content_type)] if content_type is not None else []
    scope: Scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "app": app,
    }
    size = max(1, -(-len(body) // chunks))
    parts = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    messages: list[Message] = [
        {"type": "http.request", "body": p, "more_body": i < len(parts) - 1}
        for i, p in enumerate(parts)
    ]
    if leave:
        messages = messages[:1] + [{"type": "http.disconnect"}]
        messages[0]["more_body"] = True
    sent: list[Message] = []
    exhausted = False

    async def receive() -> Message:
        nonlocal exhausted
        if messages:
            return messages.pop(0)
        exhausted = True
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(lane(scope, receive, send))
    return sent, exhausted


def _answer(sent: list[Message]) -> tuple[int, bytes]:
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], body


def test_a_well_formed_request_is_answered_by_the_endpoint_in_chunks_too() -> None:
    lane, behind = _lane()
    for chunks in (1, 3):
        sent, _ = _call(lane, "/p/p1/things/t1/go", b'{"generation": 7}', chunks=chunks)
        assert _answer(sent) == (200, b'{"project":"p1","thing":"t1","g":7}')
    charset = b"application/json; charset=utf-8"
    sent, _ = _call(lane, "/p/p1/things/t1/go", b'{"generation": 7}', content_type=charset)
    assert _answer(sent)[0] == 200
    assert behind.seen == []


@pytest.mark.parametrize(
    ("path", "method", "body", "content_type"),
    [
        ("/p/p1/things/t1/go", "PUT", b'{"generation": 7}', b"application/json"),
        ("/p/p1/things/t1/go/", "POST", b'{"generation": 7}', b"application/json"),
        ("/p/p1/things//go", "POST", b'{"generation": 7}', b"application/json"),
        ("/p/p1/things/t1/t2/go", "POST", b'{"generation": 7}', b"application/json"),
        ("/p/p1/things/t1/go", "POST", b'{"generation": 7}', b"text/plain"),
        ("/p/p1/things/t1/go", "POST", b'{"generation": 7}', None),
        ("/p/p1/things/t1/go", "POST", b'{"generation": 7', b"application/json"),
        ("/p/p1/things/t1/go", "POST", b"", b"application/json"),
        ("/p/p1/things/t1/go", "POST", b"[]", b"application/json"),
        ("/p/p1/things/t1/go", "POST", b'{"generation": "x"}', b"application/json"),
        ("/p/p1/things/t1/go", "POST", b'{"generation": 7, "x": 1}', b"application/json"),
        ("/p/p1/things/t1/go", "POST", b'{"generation": NaN}', b"application/json"),
        ("/p/p1/things/t1/go", "POST", b'{"generation": 7}\xff', b"application/json"),
        ("/p/p1/things/\x00/go", "POST", b'{"generation": 7}', b"application/json"),
        ("/p/" + "x" * 300 + "/things/t1/go", "POST", b'{"generation": 7}', b"application/json"),
    ],
)
def test_anything_else_goes_to_the_application_with_its_body(
    path: str, method: str, body: bytes, content_type: bytes | None
) -> None:
    lane, behind = _lane()
    sent, _ = _call(lane, path, body, method=method, content_type=content_type, chunks=2)
    assert _answer(sent) == (299, b"behind")
    assert behind.seen == [(path, body)]


def test_the_endpoints_refusal_is_an_error_answer_and_a_bug_is_not_swallowed() -> None:
    lane, _ = _lane()
    sent, _ = _call(lane, "/p/p1/things/t1/go", b'{"generation": 13}')
    status, body = _answer(sent)
    assert status == 409
    assert json.loads(body)["error"]["code"] == "lease_expired"
    with pytest.raises(RuntimeError, match="a bug"):
        _call(lane, "/p/p1/things/t1/go", b'{"generation": 14}')


def test_a_client_that_leaves_mid_body_gets_nothing() -> None:
    lane, behind = _lane()
    sent, _ = _call(lane, "/p/p1/things/t1/go", b'{"generation": 7}', leave=True)
    assert sent == [] and behind.seen == []


def test_the_lane_has_the_four_lease_operations_as_the_router_declares_them() -> None:
    declared = {getattr(r, "endpoint", None): r for r in routes_work.router.routes}
    names = set()
    for entry in routes_work.LANE:
        route = declared[entry.endpoint]  # the router's own endpoint, not a copy
        names.add(route.name)  # type: ignore[attr-defined]
        assert route.methods == {entry.method}  # type: ignore[attr-defined]
        sample = route.path.replace("{project_id}", "p-1").replace("{attempt_id}", "a-1")  # type: ignore[attr-defined]
        found = entry.path.match(sample)
        assert found is not None and found["project_id"] == "p-1", (entry, sample)
        assert entry.model is route.body_field.field_info.annotation  # type: ignore[attr-defined]
    assert names == {"claim", "renew", "checkpoint", "release"}


# --- the whole service: the same answers with and without the lane --------------------------


def _without_lane(svc: Service, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    monkeypatch.setattr(routes_work, "LANE", [])
    app = create_app(svc.settings, clock=svc.clock, executor=svc.executor)
    return TestClient(app, base_url=ORIGIN)


def _comparable(resp: Any) -> tuple[int, Any, str | None]:
    body = resp.json()
    body.pop("request_id", None)
    body.pop("server_time", None)
    if isinstance(body.get("error"), dict):
        body["error"].pop("request_id", None)
    return resp.status_code, body, resp.headers.get("content-type")


def test_refusals_are_the_same_with_and_without_the_lane(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = svc.project()
    task = svc.task(pid)
    owner, other = svc.agent(pid), svc.agent(pid)
    attempt = claim(owner, pid, task)["claim"]["attempt"]
    plain = _without_lane(svc, monkeypatch)
    base = f"/api/v1/projects/{pid}"
    at = f"{base}/attempts/{attempt['id']}"
    json_type = {"Content-Type": "application/json"}
    cases: list[tuple[Caller, str, bytes, dict[str, str]]] = []
    for path in (f"{at}/renew", f"{at}/checkpoints", f"{at}/release", f"{base}/claims"):
        for body in (
            b"{",
            b"",
            b"null",
            b"[]",
            b'"x"',
            b'{"generation": -1}',
            b'{"generation": 4611686018427387905}',
            b'{"generation": 1, "surprise": true}',
            b'{"generation": "1"}',
            b'{"generation": 1e400}',
            b'{"task_id": "../../x", "expected_task_revision": 1}',
            b"[" * 200 + b"]" * 200,
            b'{"summary": "\\ud800", "generation": 1}',
        ):
            cases.append((owner, path, body, json_type))
        cases.append((owner, path, b'{"generation": 1}', {"Content-Type": "text/plain"}))
        cases.append((owner, path, b'{"generation": 1}', {}))
        cases.append((other, path, b'{"generation": 1, "summary": "s", "handoff": "h"}', json_type))
        cases.append((owner, path, b'{"generation": 9, "summary": "s", "handoff": "h"}', json_type))
    for bad in ("x" * 300, "%00", "a b"):
        cases.append((owner, f"{base}/attempts/{bad}/renew", b'{"generation": 1}', json_type))
        cases.append((owner, f"/api/v1/projects/{bad}/claims", b"{}", json_type))
    cases.append((owner, f"/api/v1/projects/{'0' * 36}/claims", b"{}", json_type))
    # a key reused with another body (the first request answered by the lane)
    cases.append((owner, f"{at}/renew", b'{"generation": 1}', json_type))
    cases.append((owner, f"{at}/renew", b'{"generation": 2}', json_type))
    refused = 0
    for n, (who, path, body, headers) in enumerate(cases):
        answers = []
        key = "reused" if n >= len(cases) - 2 else f"case-{n}"
        for client in (svc.client, plain):  # the same key: a success is replayed to the other
            h = {**who.headers, "Idempotency-Key": key, **headers}
            answers.append(_comparable(client.post(path, content=body, headers=h)))
        assert answers[0] == answers[1], (path, body, headers)
        assert answers[0][0] < 500, (path, body, answers[0])
        refused += answers[0][0] >= 400
    assert refused >= len(cases) - 3  # the reused key's first use (and no other) succeeds
    assert answers[0][1]["error"]["code"] == "idempotency_conflict"


def test_the_lane_answers_well_formed_lease_requests_with_the_services_endpoints(
    svc: Service,
) -> None:
    """The lane in front of an application that answers nothing (418): the lease operations
    still work, through the service's own endpoints and database; a malformed one reaches
    the application."""
    behind = Behind()
    lane = LeaseLane(behind, routes_work.LANE)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = svc.app  # where the endpoints find the service's runtime
        await lane(scope, receive, send)

    pid = svc.project()
    task = svc.task(pid)
    agent = svc.agent(pid)
    agent.client = TestClient(app, base_url=ORIGIN)
    got = agent.post(f"/api/v1/projects/{pid}/claims", {})["claim"]
    assert got["task"]["id"] == task["id"]
    at = f"/api/v1/projects/{pid}/attempts/{got['attempt']['id']}"
    assert agent.post(f"{at}/renew", {"generation": 1})["attempt"]["generation"] == 1
    assert agent.post(f"{at}/checkpoints", {"generation": 1, "summary": "s"})
    assert agent.post(f"{at}/release", {"generation": 1, "handoff": "h"})
    assert svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")["work_status"] == "ready"
    with pytest.raises(ApiError) as err:  # the endpoint's refusal, from the lane
        agent.post(f"{at}/renew", {"generation": 1})
    assert err.value.code == "lease_expired"
    assert behind.seen == []
    malformed = agent.raw("POST", f"{at}/renew", {"generation": "one"})
    assert malformed.status_code == 299
    assert behind.seen == [(f"{at}/renew", b'{"generation":"one"}')]
