"""What a running attempt spent so far rides on its lease renewal (issue 33), on SQLite and
PostgreSQL: the loop tells it with the step, the task page shows it beside the elapsed time;
one renewal that does not tell it keeps the last told; a bad figure is refused, nothing kept."""

from __future__ import annotations

from typing import Any

import pytest

from tests.service.console.change_kit import launched
from tests.service.console.kit import browse_as
from tests.service.kit import Service


def test_the_spend_so_far_rides_on_the_renewal(svc: Service) -> None:
    pid, task, attempt, loop, launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    gen = attempt["generation"]
    page = f"/console/projects/{pid}/tasks/{task['id']}"
    # The launch cannot renew (nor tell a spend): the loop holds the lease.
    resp = launch.raw("POST", f"{at}/renew", {"generation": gen, "spent_usd": 0.0})
    assert resp.status_code == 403, resp.text
    loop.post(f"{at}/renew", {"generation": gen, "step": "Bash: make test", "spent_usd": 0.4})
    loop.post(f"{at}/renew", {"generation": gen, "spent_usd": 1.256, "spent_tokens": 123456})
    browse_as(svc, svc.admin)
    html = svc.client.get(page).text
    assert '<span class="spent-now">$1.26</span> spent' in html, html
    assert '<span class="tokens-now">123,456</span> tokens' in html  # the step stays too
    assert '<span class="step-now">Bash: make test</span>' in html
    # Tools read the same from the task's view.
    view = loop.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    [live] = [a["live"] for a in view["attempts"] if a["id"] == attempt["id"]]
    assert live["step"] == "Bash: make test" and live["spent_usd"] == 1.256
    assert live["spent_tokens"] == 123456 and live["at"]
    loop.post(f"{at}/renew", {"generation": gen, "step": "Edit: calc.py"})  # the spend stays
    browse_as(svc, svc.admin)
    html = svc.client.get(page).text
    assert "$1.26</span> spent" in html and "Edit: calc.py" in html
    loop.post(f"{at}/release", {"generation": gen, "handoff": "stopping"})
    browse_as(svc, svc.admin)
    html = svc.client.get(page).text
    assert "Attempts" in html and "spent-now" not in html and "tokens-now" not in html
    view = loop.get(f"/api/v1/projects/{pid}/tasks/{task['id']}")
    assert [a["live"] for a in view["attempts"] if a["id"] == attempt["id"]] == [None]


@pytest.mark.parametrize("bad", [-0.01, "1.0", 1e7, True])
def test_a_bad_spend_is_refused_and_nothing_kept(svc: Service, bad: Any) -> None:
    pid, task, attempt, loop, _launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    resp = loop.raw("POST", f"{at}/renew", {"generation": attempt["generation"], "spent_usd": bad})
    assert resp.status_code == 422, resp.text
    browse_as(svc, svc.admin)
    html = svc.client.get(f"/console/projects/{pid}/tasks/{task['id']}").text
    assert "Attempts" in html and "spent-now" not in html


@pytest.mark.parametrize("bad", [-1, 1.5, "10", 4 * 10**12 + 1, True])
def test_bad_tokens_are_refused_and_nothing_kept(svc: Service, bad: Any) -> None:
    pid, task, attempt, loop, _launch = launched(svc)
    at = f"/api/v1/projects/{pid}/attempts/{attempt['id']}"
    body = {"generation": attempt["generation"], "spent_tokens": bad}
    resp = loop.raw("POST", f"{at}/renew", body)
    assert resp.status_code == 422, resp.text
    assert "spent_tokens" in resp.text
    browse_as(svc, svc.admin)
    html = svc.client.get(f"/console/projects/{pid}/tasks/{task['id']}").text
    assert "Attempts" in html and "tokens-now" not in html
