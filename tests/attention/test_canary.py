"""agentc-attention canary against a live coordinator that admits the canary agent: a green run
(the pipeline played by hand: a worker claims and submits, the integrator lands), a timeout, a
wrong harness in the ledger, a task that cannot be created; each failure pages once and the
next pass sends the recovery note; every result is reported exactly once."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentc.core.rules import canonical_json, sha256_hex
from tests.attention.kit import (
    ATTENTION,
    Receiver,
    Setup,
    admin,
    attention,
    land,
    private,
    ready_tasks,
    set_review_mode,
    set_up,
)
from tests.kit.live import LiveServer, live_server


@pytest.fixture
def server(sqlite_database: str, tmp_path: Path) -> Iterator[LiveServer]:
    extra = ("--canary-principals", "canary-bot")
    with live_server(sqlite_database, tmp_path, *extra) as found:
        yield found


@pytest.fixture
def canary(server: LiveServer, tmp_path: Path) -> Setup:
    setup = set_up(server, tmp_path)
    set_review_mode(server, setup.project_id, "none")
    token = server.issue_token("canary-bot", setup.project_id)
    private(tmp_path / "canary-token", token + "\n")
    return setup


def _config(setup: Setup, ntfy: Receiver, **canary: Any) -> Path:
    return setup.config(
        ntfy={"url": ntfy.url, "topic": "canary"},
        canary={
            "token_file": str(setup.root / "canary-token"),
            "harnesses": ["example", "codex"],
            "host": "host-a",
            "poll_seconds": 0.2,
            "timeout_minutes": 2,
            "ledgers": [str(setup.root / "ledger.jsonl")],
            **canary,
        },
    )


def _results(setup: Setup) -> list[dict[str, Any]]:
    path = setup.root / "state" / "canary-results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _green(setup: Setup, config: Path, served: str = "example") -> subprocess.CompletedProcess[str]:
    """Run the canary while the test plays the pipeline: it lands the canary task."""
    integrator = setup.server.issue_token(
        f"integrator-{time.monotonic_ns()}", setup.project_id, credential_class="integrator"
    )
    token = setup.token_file.read_text().strip()
    proc = subprocess.Popen(
        [ATTENTION, "--config", str(config), "canary", "--harness", "example"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (found := ready_tasks(setup.server, setup.project_id, token)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    [task] = found
    assert task["priority"] == 0 and task["admission_class"] == "canary"
    assert "create the file canary/" in task["description"]
    with (setup.root / "ledger.jsonl").open("a") as fh:
        fh.write(json.dumps({"task": task["id"], "role": "impl", "upstream": served}) + "\n")
    land(setup.server, setup.project_id, task, integrator)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _canary_page(setup: Setup) -> str:
    with admin(setup.server) as person:
        return person.get(f"/console/projects/{setup.project_id}/costs").text


def test_a_green_run_is_recorded_and_reported_once(canary: Setup, ntfy: Receiver) -> None:
    config = _config(canary, ntfy)
    done = _green(canary, config)
    assert done.returncode == 0, done.stderr
    [row] = _results(canary)
    assert row["outcome"] == "ok" and row["served_by"] == "example" and row["host"] == "host-a"
    assert row["canary"] is True and row["duration_seconds"] > 0 and row["task_id"]
    assert not ntfy.got
    reported = json.loads((canary.root / "state" / "canary-reported.json").read_text())
    assert len(reported) == 1
    page = _canary_page(canary)
    assert "<td>host-a</td><td>example</td>" in page
    assert "Canary runs per host and harness" in page
    assert '<th scope="row">host-a · example</th><td>1</td><td>0</td>' in page


def test_a_timeout_pages_once_and_the_next_pass_recovers(canary: Setup, ntfy: Receiver) -> None:
    config = _config(canary, ntfy, timeout_minutes=0.02)
    first = attention(config, "canary", "--harness", "example")
    assert first.returncode == 1, first.stderr
    [row] = _results(canary)
    assert row["outcome"] == "timeout" and "was not done within 0.02 minutes" in row["reason"]
    assert [r.headers["Title"] for r in ntfy.got] == [
        f"agentc {canary.project_id}: canary:example failing"
    ]
    assert b"agentc e2e canary failed on host-a" in ntfy.got[0].body
    # The first task is still ready (nobody works here): land it, then a green pass recovers.
    token = canary.token_file.read_text().strip()
    integrator = canary.server.issue_token(
        "integrator", canary.project_id, credential_class="integrator"
    )
    [left] = ready_tasks(canary.server, canary.project_id, token)
    land(canary.server, canary.project_id, left, integrator)
    done = _green(canary, _config(canary, ntfy))
    assert done.returncode == 0, done.stderr
    assert ntfy.got[-1].headers["Title"] == f"agentc {canary.project_id}: canary:example recovered"
    assert len(ntfy.got) == 2


def test_a_fallback_vendor_never_passes_for_the_primary(canary: Setup, ntfy: Receiver) -> None:
    done = _green(canary, _config(canary, ntfy), served="codex")
    assert done.returncode == 1
    [row] = _results(canary)
    assert row["outcome"] == "failed" and "was served by codex, not example" in row["reason"]
    assert len(ntfy.got) == 1


def test_a_task_that_cannot_be_created_fails_and_pages(
    canary: Setup, ntfy: Receiver, tmp_path: Path
) -> None:
    other = canary.server.issue_token("not-a-canary", canary.project_id)
    private(tmp_path / "canary-token", other + "\n")
    out = attention(_config(canary, ntfy), "canary", "--harness", "example")
    assert out.returncode == 1
    [row] = _results(canary)
    assert row["outcome"] == "failed"
    assert "could not be created: operation_not_permitted" in row["reason"]
    assert len(ntfy.got) == 1
    # Its result is not accepted either (not a canary agent): kept for later runs, and the
    # exit status is the canary's own.
    assert "canary results not reported (kept for the next run)" in out.stderr
    assert not (canary.root / "state" / "canary-reported.json").exists()


def test_results_not_accepted_are_resent_and_counted_once(canary: Setup, ntfy: Receiver) -> None:
    config = _config(canary, ntfy, timeout_minutes=0.01)
    assert attention(config, "canary", "--harness", "example").returncode == 1
    (canary.root / "state" / "canary-reported.json").unlink()  # as if the answer was lost
    assert attention(config, "canary", "--harness", "example").returncode == 1
    assert len(_results(canary)) == 2
    assert len(json.loads((canary.root / "state" / "canary-reported.json").read_text())) == 2
    page = _canary_page(canary)
    assert (
        '<th scope="row">host-a · example</th><td>0</td><td>2</td>' in page
    )  # the first row sent twice


def test_an_unknown_harness_is_refused(canary: Setup, ntfy: Receiver) -> None:
    out = attention(_config(canary, ntfy), "canary", "--harness", "pi")
    assert out.returncode == 2 and "--harness pi: not in [canary] harnesses" in out.stderr


def test_the_reported_list_keeps_only_rows_still_read_and_survives_damage(
    canary: Setup, ntfy: Receiver
) -> None:
    config = _config(canary, ntfy, timeout_minutes=0.01)
    state = canary.root / "state"
    results, reported = state / "canary-results.jsonl", state / "canary-reported.json"
    assert attention(config, "canary", "--harness", "example").returncode == 1
    results.write_text("")  # the first row is past the part of the results a run reads
    assert attention(config, "canary", "--harness", "example").returncode == 1
    [second] = _results(canary)
    assert json.loads(reported.read_text()) == [sha256_hex(canonical_json(second))]
    reported.write_text("[damaged")  # resent, not a crash: the coordinator keeps a row once
    assert attention(config, "canary", "--harness", "example").returncode == 1
    assert len(json.loads(reported.read_text())) == 2
    page = _canary_page(canary)
    assert '<th scope="row">host-a · example</th><td>0</td><td>3</td>' in page
