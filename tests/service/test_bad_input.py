"""Malformed, unknown, oversized and mistyped input: a 4xx naming the problem, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from tests.service.kit import Service


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
    assert resp.status_code == 422
    assert resp.json()["error"]["message"].startswith("query.cursor")
    task = svc.task(project)
    resp = svc.admin.raw(
        "PATCH",
        f"/api/v1/projects/{project}/tasks/{task['id']}",
        {"expected_revision": 2**70, "title": "x"},
    )
    assert resp.status_code == 422
    assert resp.json()["error"]["message"].startswith("expected_revision")
