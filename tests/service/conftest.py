from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.service.kit import Clock, Service, running


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def svc(database: str, clock: Clock) -> Iterator[Service]:
    with running(database, clock, canary_principals=frozenset({"canary-bot"})) as service:
        yield service
