"""The checks one by one, against a live coordinator, with the checker's clock moved forward
(the neglect days, the red target's minutes, a lease's budget) where a check measures time;
and the repeat and recovery rules of :func:`agentc.attention.watch.settle`."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from agentc.attention import watch
from agentc.attention.checks import Observation, run_checks
from agentc.attention.config import AttentionConfig
from agentc.attention.state import State
from agentc.core.rules import rfc3339
from tests.attention.kit import (
    Setup,
    admin,
    attention,
    claimed,
    new_task,
    set_review_mode,
    submit_code,
)

HOUR_MS = 3600_000
DAY_MS = 24 * HOUR_MS


def _now() -> int:
    return time.time_ns() // 1_000_000


def _load(path: Path) -> AttentionConfig:
    return AttentionConfig.load(path)


def _look(
    setup: Setup, config: Path, *, first_run: int | None = None, ahead_ms: int = 0
) -> Observation:
    now = _now()
    token = setup.token_file.read_text().strip()
    return run_checks(_load(config), token, first_run or now, now + ahead_ms)


def test_the_neglect_clock_runs_from_the_first_run_and_a_person_s_read_resets_it(
    setup: Setup,
) -> None:
    config = setup.config(checks={"neglect_days": 3})
    assert "neglect" not in _look(setup, config, ahead_ms=2 * DAY_MS).failing
    seen = _look(setup, config, ahead_ms=4 * DAY_MS)
    assert seen.failing["neglect"].text == "the attention digest was never read (more than 3 days)"

    # The agent reading the digest over the API is not a read ...
    token = setup.token_file.read_text().strip()
    got = httpx.get(
        f"{setup.server.url}/api/v1/projects/{setup.project_id}/attention",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert got.status_code == 200 and got.json()["data"]["last_read"] is None
    # ... a person opening the project's Attention page in the console is.
    with admin(setup.server) as person:
        page = person.get(f"/console/projects/{setup.project_id}/attention")
        assert page.status_code == 200 and "never read" in page.text
        again = person.get(f"/console/projects/{setup.project_id}/attention")
        assert "last read" in again.text and "by admin (this page)" in again.text
    seen = _look(setup, config, first_run=_now() - 10 * DAY_MS, ahead_ms=2 * DAY_MS)
    assert "neglect" not in seen.failing
    seen = _look(setup, config, ahead_ms=4 * DAY_MS)
    assert seen.failing["neglect"].text.startswith("the attention digest was last read 20")


def test_an_undesignated_attention_agent_fails_the_digest_check(setup: Setup) -> None:
    out = setup.server.cli("designate-digest-sender", "--project", setup.project_id, "--clear")
    assert out.returncode == 0, out.stderr
    seen = _look(setup, setup.config())
    assert "the digest cannot be read: operation_not_permitted" in seen.failing["digest"].text
    assert "neglect" not in seen.ran  # it could not look: a neglect page stays as it was


def _report(path: Path, event: str, target: str, at_ms: int, **extra: Any) -> None:
    with path.open("a") as fh:
        row = {"at": rfc3339(at_ms), "event": event, "target": target, "task_id": "t", **extra}
        fh.write(json.dumps(row) + "\n")


def _waiting_task(setup: Setup) -> None:
    """A task waiting in integration: claimed, submitted, no review (the project's policy)."""
    server, pid = setup.server, setup.project_id
    set_review_mode(server, pid, "none")
    task = new_task(server, pid, "waits")
    with claimed(server, pid, task) as (agent, attempt):
        submit_code(agent, pid, task, attempt)


def test_a_red_target_blocking_integration_pages_after_the_minutes_and_repeats(
    setup: Setup, tmp_path: Path
) -> None:
    reports = tmp_path / "reports.jsonl"
    config = setup.config(
        checks={"integrator_reports": str(reports), "target_block_minutes": 30, "neglect_days": 0}
    )
    now = _now()
    red = "c" * 40
    _report(reports, "landed", "d" * 40, now - 2 * HOUR_MS)
    _report(
        reports,
        "target_red",
        red,
        now - 1 * HOUR_MS,
        checks=[{"name": "unit", "outcome": "failed"}],
    )
    assert "target:cccccccccccc" not in _look(setup, config).failing  # nothing waits behind it
    _waiting_task(setup)
    assert "target:cccccccccccc" not in _look(setup, config, ahead_ms=-40 * 60_000).failing
    found = _look(setup, config).failing["target:cccccccccccc"]
    assert "the target cccccccccccc fails unit; 1 task(s) wait in integration" in found.text
    assert found.repage_minutes == 360

    st = State(first_run_ms=now)
    seen = _look(setup, config)
    watch.settle(st, seen, now, ["ntfy"], "p")
    watch.settle(st, seen, now + 359 * 60_000, ["ntfy"], "p")
    assert [p.title for p in st.outbox] == ["agentc p: target:cccccccccccc failing"]
    watch.settle(st, seen, now + 361 * 60_000, ["ntfy"], "p")
    assert st.outbox[-1].title == "agentc p: target:cccccccccccc still failing"
    # The target moved and landed: the block is over, one low-priority recovery note.
    _report(reports, "landed", "e" * 40, now)
    cleared = _look(setup, config)
    assert "target:cccccccccccc" not in cleared.failing and "target" in cleared.ran
    watch.settle(st, cleared, now + 400 * 60_000, ["ntfy"], "p")
    assert st.outbox[-1].kind == "recovered" and st.outbox[-1].priority == 2
    assert len(st.outbox) == 3


def test_a_lease_held_past_its_budget_pages(setup: Setup) -> None:
    _waiting_task(setup)  # a submitted attempt is not held
    task = new_task(setup.server, setup.project_id, "held")
    with claimed(setup.server, setup.project_id, task) as (_agent, held):
        attempt = held["id"]
    checks = {"lease_overdue_minutes": 15, "neglect_days": 0, "attempt_budget_minutes": 60}
    config = setup.config(checks=checks)
    assert f"lease:{attempt}" not in _look(setup, config, ahead_ms=3600 * 1000).failing
    seen = _look(setup, config, ahead_ms=(3600 + 16 * 60) * 1000)
    assert "minutes past its budget of 3600 s" in seen.failing[f"lease:{attempt}"].text
    assert "'held'" in seen.failing[f"lease:{attempt}"].text


def test_the_heartbeat_s_holds_page_the_cost_cap_and_an_unusable_vendor(
    setup: Setup, tmp_path: Path
) -> None:
    now = _now()
    beat = setup.beat(
        tmp_path / "hb.json",
        holds={"cost_cap": "the daily cost cap is reached ($150.00 of $150.00)"},
        vendors=[
            {"name": "claude", "reason": "signed out", "until_ms": None},
            {"name": "codex", "reason": None, "until_ms": now + 5 * 60_000},
        ],
    )
    config = setup.config(checks={"heartbeat": str(beat), "neglect_days": 0})
    seen = _look(setup, config)
    assert seen.failing["cost_cap"].text.startswith("the supervisor claims nothing: the daily")
    assert seen.failing["vendor:claude"].text == "vendor claude: signed out"
    assert "vendor:codex" not in seen.failing  # rate-limited for less than vendor_limit_minutes
    config = setup.config(
        checks={"heartbeat": str(beat), "neglect_days": 0, "vendor_limit_minutes": 0}
    )
    assert "rate-limited" in _look(setup, config).failing["vendor:codex"].text
    # A heartbeat that went missing says nothing of the holds: the cap's page stays, no
    # recovery note is sent for it.
    st = State(first_run_ms=now)
    watch.settle(st, seen, now, ["log"], "p")
    beat.unlink()
    gone = _look(setup, config)
    assert "cost_cap" not in gone.ran and "heartbeat" in gone.failing
    watch.settle(st, gone, now + 1, ["log"], "p")
    assert "cost_cap" in st.failing and not [p for p in st.outbox if p.kind == "recovered"]
    setup.beat(beat)  # fresh and without holds: now the cap has recovered
    watch.settle(st, _look(setup, config), now + 2, ["log"], "p")
    assert {p.key for p in st.outbox if p.kind == "recovered"} >= {"cost_cap", "heartbeat"}


def test_a_spike_of_egress_refusals_in_one_launch_pages(setup: Setup, tmp_path: Path) -> None:
    log = tmp_path / "egress.jsonl"
    now = _now()
    rows = [
        {"time": rfc3339(now - 60_000), "launch": "L1", "allowed": False, "host": "evil.example"}
        for _ in range(5)
    ]
    rows += [{"time": rfc3339(now), "launch": "L2", "allowed": True, "host": "api.anthropic.com"}]
    rows += [{"time": rfc3339(now - 2 * HOUR_MS), "launch": "L3", "allowed": False}] * 9
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    config = setup.config(checks={"egress_log": str(log), "egress_denials": 5, "neglect_days": 0})
    seen = _look(setup, config)
    assert sorted(k for k in seen.failing if k.startswith("egress")) == ["egress:L1"]
    assert "refused 5 connections" in seen.failing["egress:L1"].text


def test_a_damaged_state_file_is_moved_aside_and_paging_goes_on(
    setup: Setup, ntfy: Any, tmp_path: Path
) -> None:
    state_dir = setup.root / "state"
    state_dir.mkdir()
    (state_dir / "state.json").write_text("{ not json")
    (state_dir / "state.json").chmod(0o600)
    config = setup.config(
        ntfy={"url": ntfy.url, "topic": "t"}, checks={"heartbeat": str(tmp_path / "none")}
    )
    out = attention(config, "check")
    assert out.returncode == 1, out.stderr
    assert "could not be read (JSONDecodeError); moved to" in out.stderr
    assert len(ntfy.got) == 1
    assert [p.name for p in state_dir.iterdir() if p.name.startswith("state.json.damaged-")]


@contextmanager
def _coordinator_that(next_does: str) -> Iterator[str]:
    """A stand-in coordinator on loopback: healthy, and its ``next`` either drops the
    connection (it went away after its health answered) or answers after 2 s."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                body = b'{"status": "ok"}'
            elif "/next" in self.path and next_does == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            else:
                if "/next" in self.path:
                    time.sleep(2)
                body = b'{"data": {"items": [], "next_cursor": null}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_next_pages_when_slow_not_when_the_coordinator_goes_away(
    setup: Setup, tmp_path: Path
) -> None:
    """``next`` measures the coordinator's answer time; a connection that fails after the
    health check answered is the coordinator going away, which its own check pages at the
    next run (the whole-system soak found ``next`` paged beside ``coordinator`` for one
    coordinator killed between the two requests)."""
    for does, paged in (("drop", False), ("slow", True)):
        with _coordinator_that(does) as origin:
            config = tmp_path / f"{does}.toml"
            config.write_text(
                f'origin = "{origin}"\nproject_id = "p"\ntoken_file = "{setup.token_file}"\n'
                f'allow_insecure_loopback = true\nstate_dir = "{tmp_path / does}"\n'
                "[checks]\nnext_budget_seconds = 1\nneglect_days = 0\nlease_overdue_minutes = 0\n"
            )
            seen = _look(setup, config)
        assert ("next" in seen.failing) is paged, (does, seen.failing)
        assert ("next" in seen.ran) is paged, does  # dropped: it could not look
        if paged:
            assert seen.failing["next"].text.startswith("next did not answer within 1 s")
