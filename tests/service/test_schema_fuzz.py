"""schemathesis against the OpenAPI schema: whatever it sends, the service answers without a
5xx. It fuzzes as an agent with a session, and half the time with a real project id so the
requests get past "not found" into the operations themselves."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.service.kit import Clock, Service

_dir = tempfile.TemporaryDirectory(prefix="agentc-fuzz-")
SVC = Service(str(Path(_dir.name) / "fuzz.sqlite3"), Clock())
PROJECT = SVC.project()
AGENT = SVC.agent(PROJECT)
TASK = SVC.task(PROJECT)

schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", SVC.app)


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
def test_no_server_errors(case: Any) -> None:
    params = case.path_parameters or {}
    if "project_id" in params and hash(repr(case.body)) % 2 == 0:
        params["project_id"] = PROJECT
        if "task_id" in params:
            params["task_id"] = TASK["id"]
    headers = {**AGENT.headers, "Idempotency-Key": str(uuid.uuid4())}
    case.call_and_validate(headers=headers, checks=[not_a_server_error])
