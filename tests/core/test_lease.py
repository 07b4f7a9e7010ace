from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentc.core import lease
from agentc.core.errors import CoordinatorError

T = 1_000_000_000_000
S = 1000


def test_the_reference_worked_example() -> None:
    """lease 600 s, max attempt 3600 s, claimed at T."""
    expires = lease.renewed_expiry(T, 600, T, 3600)
    assert expires == T + 600 * S
    assert lease.renew_after_seconds(expires - T) == 60
    r = lease.renew(T + 60 * S, expires, 600, T, 3600)
    assert (r.expires_at, r.remaining_ms, r.renew_after_seconds) == (T + 660 * S, 600_000, 60)
    r = lease.renew(T + 3300 * S, T + 3400 * S, 600, T, 3600)
    assert (r.expires_at, r.remaining_ms, r.renew_after_seconds) == (T + 3600 * S, 300_000, 60)
    with pytest.raises(CoordinatorError) as err:
        lease.renew(T + 3590 * S, T + 3600 * S, 600, T, 3600)
    assert err.value.code == "attempt_duration_exceeded"
    with pytest.raises(CoordinatorError) as err:
        lease.renew(T + 3600 * S, T + 3600 * S, 600, T, 3600)
    assert err.value.code == "lease_expired"


def test_expiry_is_strict() -> None:
    assert lease.is_live(T, T + 1)
    assert not lease.is_live(T + 1, T + 1)
    assert not lease.is_live(T + 2, T + 1)


def test_short_leases_renew_at_a_third() -> None:
    assert lease.renew_after_seconds(30_000) == 10
    assert lease.renew_after_seconds(90_000) == 30
    assert lease.renew_after_seconds(0) == 0


@given(
    lease_s=st.integers(30, 3600),
    cap=st.sampled_from([0, 600, 3600, 604800]),
    elapsed=st.integers(0, 604800 * S),
)
def test_renewal_never_passes_the_cap_nor_shrinks(lease_s: int, cap: int, elapsed: int) -> None:
    created = T
    expires = lease.renewed_expiry(created, lease_s, created, cap)
    now = created + elapsed
    try:
        r = lease.renew(now, expires, lease_s, created, cap)
    except CoordinatorError as exc:
        assert exc.code in ("lease_expired", "attempt_duration_exceeded")
        return
    assert r.expires_at >= expires
    assert r.expires_at <= now + lease_s * S
    if cap:
        assert r.expires_at <= created + cap * S
    assert 0 <= r.renew_after_seconds <= 60
