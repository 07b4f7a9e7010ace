"""schemathesis against the OpenAPI schema, over SQLite and PostgreSQL: whatever it sends, the
service answers without a 5xx. It fuzzes as an agent with a session, and half the time with a
real project id so the requests get past "not found" into the operations themselves."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from hypothesis.strategies import SearchStrategy
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from tests.kit.pg import PgServer
from tests.service.kit import ORIGIN, Caller, Clock, Service


@dataclass
class Target:
    service: Service
    agent: Caller
    project: str
    task: str


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    if request.param == "sqlite":
        database = str(tmp_path_factory.mktemp("fuzz") / "fuzz.sqlite3")
    else:
        pg: PgServer = request.getfixturevalue("pg_server")
        database = pg.create_database(f"fuzz_{uuid.uuid4().hex[:8]}")
    service = Service(database, Clock())
    project = service.project()
    yield Target(service, service.agent(project), project, service.task(project)["id"])
    service.close()


@pytest.mark.slow
def test_no_server_errors(target: Target) -> None:
    """Every operation, with data that fits the schema and data that does not."""
    # Under the name the service answers at (it refuses any other Host, "testserver" too).
    host = {"Host": urlsplit(ORIGIN).netloc}
    schema = schemathesis.openapi.from_asgi(
        "/api/v1/openapi.json", target.service.app, headers=host
    )
    failures: list[str] = []
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operations.append(result.ok())
    assert len(operations) > 30
    for operation in operations:
        for mode in GenerationMode:
            try:
                _fuzz(target, operation.as_strategy(generation_mode=mode))
            except Unsatisfiable:
                assert mode == GenerationMode.NEGATIVE  # nothing in its schema to get wrong
            except Exception as exc:  # every operation runs; all failures are reported
                failures.append(f"{operation.label} ({mode}): {exc}")
    assert failures == [], "\n\n".join(failures)


def _fuzz(target: Target, cases: SearchStrategy[Case[Any]]) -> None:
    @given(cases)
    @settings(
        max_examples=10,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def run(case: Case[Any]) -> None:
        params = case.path_parameters or {}
        if "project_id" in params and hash(repr(case.body)) % 2 == 0:
            params["project_id"] = target.project
            if "task_id" in params:
                params["task_id"] = target.task
        headers = {**target.agent.headers, "Idempotency-Key": str(uuid.uuid4())}
        resp = case.call_and_validate(base_url=ORIGIN, headers=headers, checks=[not_a_server_error])
        assert resp.status_code != 421, "the fuzz must reach the service, not its Host refusal"

    run()
