"""A project's policy (PATCH /api/v1/projects/{id}/policy): admins only, at the revision read,
and the audit event records what changed."""

from __future__ import annotations

import json

import pytest

from tests.service.kit import ApiError, Service

OLGA = "olga's passphrase"


def test_an_admin_changes_the_policy_at_its_revision(svc: Service) -> None:
    pid = svc.project(review_mode="agent")
    path = f"/api/v1/projects/{pid}/policy"
    body = {
        "expected_revision": 1,
        "review_mode": "human",
        "lease_seconds": 600,  # unchanged: not in the event's changes
        "required_checks": [{"identity": "unit"}, {"identity": "lint", "version": "2"}],
    }
    got = svc.admin.patch(path, body)
    assert got["policy"]["revision"] == 2 and got["policy"]["review_mode"] == "human"
    assert got["policy"]["required_checks"] == [
        {"identity": "unit", "version": "1", "environment": "default"},
        {"identity": "lint", "version": "2", "environment": "default"},
    ]
    with pytest.raises(ApiError) as err:  # read at revision 1, now at 2
        svc.admin.patch(path, {**body, "review_mode": "both"})
    assert err.value.status == 409 and err.value.code == "revision_conflict"
    rows = svc.executor.read(
        lambda tx: tx.conn.exec_driver_sql(
            "SELECT data_json FROM events WHERE kind = 'policy.updated'"
        ).fetchall()
    )
    changes = json.loads(rows[0][0])["changes"]
    assert sorted(changes) == ["required_checks", "review_mode"]


def test_only_an_admin_changes_the_policy(svc: Service) -> None:
    pid = svc.project()
    svc.admin.post("/api/v1/admin/people", {"name": "olga", "role": "operator", "password": OLGA})
    olga = svc.login("olga", OLGA)
    svc.grant(olga, pid, role="operator")
    # Both may see the project; neither is an admin.
    for caller in (olga, svc.agent(pid)):
        with pytest.raises(ApiError) as err:
            caller.patch(
                f"/api/v1/projects/{pid}/policy", {"expected_revision": 1, "lease_seconds": 90}
            )
        assert err.value.status == 403
    assert svc.admin.get(f"/api/v1/projects/{pid}")["policy"]["revision"] == 1
