"""Which failures to let go of an attempt count toward giving up on it (``MAX_RELEASE_TRIES``):
only refusals. A coordinator out of reach, a pending journaled request or a 503 is tried again
at every poll however long it lasts (a host cut off for longer than five polls settles its
launches once it is back: tests/scale/test_several_hosts.py)."""

from __future__ import annotations

import pytest

from agentc.client.errors import MutationPending, TransportFailure
from agentc.core.errors import AgentcError, ConfigError, CoordinatorError
from agentc.supervisor.loop.coordinator import transient


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TransportFailure("no answer from http://127.0.0.1:9"), True),
        (MutationPending("a journaled mutation has no answer yet"), True),
        (CoordinatorError("temporarily_unavailable", "retry", status=503, retryable=True), True),
        (
            CoordinatorError("clock_reconciliation_required", "wait", status=503, retryable=True),
            True,
        ),
        (CoordinatorError("operation_not_permitted", "no", status=403), False),
        (CoordinatorError("lease_expired", "gone", status=409), False),
        (ConfigError("set [run] reviewer = true"), False),
    ],
)
def test_only_refusals_count_toward_giving_up(exc: AgentcError, expected: bool) -> None:
    assert transient(exc) is expected
