"""Malformed, unknown, oversized and mistyped input: a 4xx naming the problem, never a 500."""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from collections.abc import Iterator
from contextlib import closing
from typing import Any
from urllib.parse import quote

import pytest
from fastapi import Request
from sqlalchemy.exc import DBAPIError
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.testclient import TestClient

from agentc.store.sql import fetch_one
from agentc.store.tx import Tx
from tests.kit.live import LiveServer
from tests.service.kit import ORIGIN, Service


@pytest.fixture
def project(svc: Service) -> str:
    return svc.project()


def _post_raw(svc: Service, path: str, content: bytes) -> tuple[int, dict[str, Any]]:
    h = {**svc.admin.headers, "Idempotency-Key": "k", "Content-Type": "application/json"}
    svc.client.cookies.clear()
    for k, v in svc.admin.cookies.items():
        svc.client.cookies.set(k, v)
    resp = svc.client.post(path, content=content, headers=h)
    return resp.status_code, resp.json()


def test_malformed_json(svc: Service, project: str) -> None:
    status, body = _post_raw(svc, f"/api/v1/projects/{project}/tasks", b'{"title": ')
    assert status == 400
    assert body["error"]["code"] == "invalid_request"
    assert "malformed JSON" in body["error"]["message"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"title": "t", "acceptance_criteria": ["c"], "colour": "red"}, "colour"),
        ({"title": 5, "acceptance_criteria": ["c"]}, "title"),
        ({"title": "t", "acceptance_criteria": []}, "acceptance_criteria"),
        ({"title": "t", "acceptance_criteria": ["c"] * 101}, "acceptance_criteria"),
        ({"title": "t", "acceptance_criteria": ["c"], "priority": 4}, "priority"),
        ({"title": "t", "acceptance_criteria": ["c"], "priority": "1"}, "priority"),
        ({"title": "t", "acceptance_criteria": ["c"], "kind": "poem"}, "kind"),
        ({"acceptance_criteria": ["c"]}, "title"),
    ],
)
def test_field_errors_name_the_field(
    svc: Service, project: str, body: dict[str, Any], field: str
) -> None:
    resp = svc.admin.raw("POST", f"/api/v1/projects/{project}/tasks", body)
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["code"] == "invalid_input"
    assert err["message"].startswith(field)


def test_oversized_body(svc: Service, project: str) -> None:
    big = b'{"title": "' + b"x" * (1024 * 1024) + b'"}'
    status, body = _post_raw(svc, f"/api/v1/projects/{project}/tasks", big)
    assert status == 413
    assert body["error"]["code"] == "payload_too_large"


def test_dependency_errors(svc: Service, project: str) -> None:
    a = svc.task(project)
    resp = svc.admin.raw(
        "POST",
        f"/api/v1/projects/{project}/tasks",
        {"title": "t", "acceptance_criteria": ["c"], "depends_on": ["nope"]},
    )
    assert resp.status_code == 422 and "nope" in resp.json()["error"]["message"]
    b = svc.task(project, depends_on=[a["id"]])
    resp = svc.admin.raw(
        "PATCH",
        f"/api/v1/projects/{project}/tasks/{a['id']}",
        {"expected_revision": a["revision"], "depends_on": [b["id"]]},
    )
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "dependency_cycle"


def test_unknown_records(svc: Service, project: str) -> None:
    resp = svc.admin.raw("GET", "/api/v1/projects/does-not-exist")
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "project_not_found"
    resp = svc.admin.raw("GET", f"/api/v1/projects/{project}/tasks/does-not-exist")
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "record_not_found"


def test_stale_revision_on_edit(svc: Service, project: str) -> None:
    task = svc.task(project)
    resp = svc.admin.raw(
        "PATCH",
        f"/api/v1/projects/{project}/tasks/{task['id']}",
        {"expected_revision": 7, "title": "new"},
    )
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "revision_conflict"


def test_numbers_beyond_64_bits_are_refused(svc: Service, project: str) -> None:
    resp = svc.admin.raw("GET", f"/api/v1/projects/{project}/events?cursor={2**63}")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "invalid_request"
    assert resp.json()["error"]["message"].startswith("cursor:")
    task = svc.task(project)
    resp = svc.admin.raw(
        "PATCH",
        f"/api/v1/projects/{project}/tasks/{task['id']}",
        {"expected_revision": 2**70, "title": "x"},
    )
    assert resp.status_code == 422
    assert resp.json()["error"]["message"].startswith("expected_revision")


@pytest.mark.parametrize(
    "cursor",
    ["²:x", "1" * 30 + ":x", "9" * 19 + ":x", "-1:x", "1:", ":", "12", "1:a%20b", "1:" + "x" * 129],
)
def test_a_bad_task_cursor_is_400_naming_it(svc: Service, project: str, cursor: str) -> None:
    resp = svc.admin.raw("GET", f"/api/v1/projects/{project}/tasks?cursor={cursor}")
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_request" and err["message"].startswith("cursor:")
    assert err["details"]["field"] == "cursor"


def test_task_pages_follow_their_cursors(svc: Service, project: str) -> None:
    made = {svc.task(project)["id"] for _ in range(3)}
    seen: list[str] = []
    cursor = ""
    while True:
        query = f"limit=2&cursor={quote(cursor, safe='')}" if cursor else "limit=2"
        page = svc.admin.get(f"/api/v1/projects/{project}/tasks?{query}")
        seen += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(made)


@pytest.mark.parametrize(
    "method, path, field",
    [
        ("GET", "/api/v1/projects/a%00b", "project_id"),
        ("GET", "/api/v1/projects/{p}/tasks/a%00b", "task_id"),
        ("GET", "/api/v1/projects/{p}/tasks/a%00b/workflow", "task_id"),
        ("GET", "/api/v1/projects/{p}/attempts/a%00b", "attempt_id"),
        ("GET", "/api/v1/projects/{p}/tasks/" + "x" * 129, "task_id"),
        ("GET", "/api/v1/projects/{p}/tasks/caf%C3%A9", "task_id"),
        ("GET", "/api/v1/sessions/a%00b", "session_id"),
        ("POST", "/api/v1/admin/credentials/a%00b/revoke", "credential_id"),
        ("POST", "/api/v1/admin/principals/a%01b/disable", "principal_id"),
        ("POST", "/api/v1/projects/{p}/workflow-activities/a%00b/claim", "activity_id"),
    ],
)
def test_a_malformed_path_id_is_400_naming_it(
    svc: Service, project: str, method: str, path: str, field: str
) -> None:
    body = {"expected_submission_id": "s"} if path.endswith("/claim") else None
    resp = svc.admin.raw(method, path.replace("{p}", project), body)
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_request" and err["message"].startswith(field + ":")
    assert err["details"]["field"] == field


@pytest.mark.parametrize(
    "body, field",
    [
        ({"title": "a\x00b", "acceptance_criteria": ["c"]}, "title"),
        ({"title": "t", "acceptance_criteria": ["c\x00"]}, "acceptance_criteria.0"),
        ({"title": "t", "acceptance_criteria": ["c"], "depends_on": ["a\x00b"]}, "depends_on.0"),
    ],
)
def test_nul_in_body_text_is_422_naming_the_field(
    svc: Service, project: str, body: dict[str, Any], field: str
) -> None:
    resp = svc.admin.raw("POST", f"/api/v1/projects/{project}/tasks", body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"].startswith(field + ":")


@pytest.mark.parametrize(
    "content, problem",
    [
        (b'{"title": "t", "acceptance_criteria": ["c"], "priority": NaN}', "NaN"),
        (b'{"title": "t", "acceptance_criteria": ["c"], "priority": Infinity}', "Infinity"),
        (b'{"title": "t", "acceptance_criteria": ["c"], "priority": -Infinity}', "-Infinity"),
        (b'{"title": "t", "acceptance_criteria": ["c"], "priority": 1e400}', "1e400"),
        (b'{"title": "\\ud800", "acceptance_criteria": ["c"]}', "surrogate"),
        (b'{"title": "t", "acceptance_criteria": ["c"]' + b"\xff}", "UTF-8"),
        (b'{"title": 1' + b"0" * 5000 + b"}", "digits"),
    ],
)
def test_a_body_that_is_not_standard_json_is_400_naming_the_problem(
    svc: Service, project: str, content: bytes, problem: str
) -> None:
    status, body = _post_raw(svc, f"/api/v1/projects/{project}/tasks", content)
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["message"].startswith("body:") and problem in body["error"]["message"]


def test_an_internal_error_is_logged_without_sql_parameters(
    svc: Service, caplog: pytest.LogCaptureFixture
) -> None:
    """The one remaining 500 path: the log line (ours, and the traceback the server prints)
    names the error and its statement but never the statement's parameters."""
    secret = f"secret-{uuid.uuid4().hex}"

    def broken_query(tx: Tx) -> None:
        sql = "SELECT id FROM projects WHERE id = :key AND no_such_column = :secret"
        fetch_one(tx.conn, sql, str, key="k", secret=secret)

    async def broken(request: Request) -> Response:
        await run_in_threadpool(svc.executor.read, broken_query)
        return Response()

    svc.app.add_api_route("/api/v1/broken-for-this-test", broken)
    client = TestClient(svc.app, base_url=ORIGIN)
    with caplog.at_level(logging.ERROR, logger="agentc.service"), pytest.raises(DBAPIError) as info:
        client.get("/api/v1/broken-for-this-test", headers={"Authorization": "Bearer x"})
    assert "internal error: " in caplog.text and "no_such_column" in caplog.text
    assert secret not in caplog.text
    assert secret not in "".join(traceback.format_exception(info.value))
    client = TestClient(svc.app, base_url=ORIGIN, raise_server_exceptions=False)
    resp = client.get("/api/v1/broken-for-this-test", headers={"Authorization": "Bearer x"})
    assert resp.status_code == 500 and resp.json()["error"]["code"] == "internal_error"
    assert secret not in resp.text


def test_a_chunked_body_over_the_limit_is_413_like_a_declared_one(live: LiveServer) -> None:
    """Over a real socket to a real uvicorn server: a body of undeclared length (chunked)
    that passes 1 MiB gets the same 413 as one whose Content-Length says so; a chunked body
    under the limit still works."""
    project = {"name": "chunked", "repository_url": "https://github.com/example/repo"}
    small = json.dumps(project).encode()
    big = json.dumps({**project, "padding": "x" * (1024 * 1024)}).encode()

    def chunked(body: bytes) -> Iterator[bytes]:
        for at in range(0, len(body), 64 * 1024):
            yield body[at : at + 64 * 1024]

    admin = live.admin_client()
    with closing(admin):
        headers = {"Idempotency-Key": str(uuid.uuid4()), "Content-Type": "application/json"}
        resp = admin.post("/api/v1/projects", content=chunked(big), headers=headers)
        assert resp.request.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in resp.request.headers
        assert resp.status_code == 413, resp.text
        assert resp.json()["error"]["code"] == "payload_too_large"
        resp = admin.post("/api/v1/projects", content=big, headers=headers)
        assert (resp.status_code, resp.json()["error"]["code"]) == (413, "payload_too_large")
        resp = admin.post("/api/v1/projects", content=chunked(small), headers=headers)
        assert resp.status_code == 201, resp.text
        assert resp.json()["data"]["name"] == "chunked"
