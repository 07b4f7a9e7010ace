"""Cost rows: one per ended launch from the gateway's ledger (written by the gateway's own
Ledger), reported to a real coordinator once; refused rows quarantined; nothing lost when the
coordinator is down."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx

from agentc.gateway.ledger import Ledger
from agentc.supervisor.config import load_config
from agentc.supervisor.loop import admission, costs
from agentc.supervisor.loop.records import LaunchRecord
from tests.kit.live import LiveServer
from tests.kit.pg import free_port
from tests.supervisor.loop.kit import (
    SUBMITTING_AGENT,
    LoopKit,
    claude_stand_in,
    ledger_call,
    make_loop_kit,
)


def _report(loop: LoopKit) -> dict[str, int]:
    out = subprocess.run(
        loop.argv("report-costs"), env=loop.env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    summary: dict[str, int] = json.loads(out.stdout)
    return summary


def test_each_launch_is_reported_once_and_refused_rows_are_quarantined(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    loop.task()
    assert loop.once().returncode == 0
    [final] = loop.records("finished")
    (loop.state / "gateway").mkdir()
    ledger = Ledger(loop.state / "gateway/ledger.jsonl")
    ledger.append(
        ledger_call(final["launch_id"], final["attempt"], final["generation"], final["task"])
    )
    ledger.append(
        ledger_call(final["launch_id"], final["attempt"], final["generation"], final["task"])
    )
    # A launch whose attempt claims a generation it never had: refused by the coordinator.
    ledger.append(ledger_call("other-launch", final["attempt"], 99, final["task"]))
    assert _report(loop) == {
        "accepted": 1, "duplicates": 0, "rejected": 1, "quarantined": 0, "pending": 0
    }  # fmt: skip
    quarantined = [
        json.loads(x) for x in (loop.state / "loop/costs.quarantined").read_text().splitlines()
    ]
    assert [q["kind"] for q in quarantined] == ["rejected"]
    assert "generation" in quarantined[0]["reason"]
    # Nothing is sent twice; a lost costs.reported only makes the coordinator see a duplicate.
    assert _report(loop) == dict.fromkeys(
        ("accepted", "duplicates", "rejected", "quarantined", "pending"), 0
    )
    (loop.state / "loop/costs.reported").unlink()
    assert _report(loop)["duplicates"] == 1
    events = admin.get(f"/api/v1/projects/{loop.project}/events").json()["data"]["items"]
    assert sum(1 for e in events if e["kind"] == "telemetry.cost_rows") == 1


def test_rows_stay_pending_while_the_coordinator_is_down(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    (loop.state / "gateway").mkdir()
    Ledger(loop.state / "gateway/ledger.jsonl").append(ledger_call("l1", None, 1, "t1"))
    down = f"http://127.0.0.1:{free_port()}"
    text = loop.config.read_text().replace(
        f'service_url = "{server.url}"', f'service_url = "{down}"'
    )
    loop.config.write_text(text)
    summary = _report(loop)
    assert summary["pending"] == 1 and summary["accepted"] == 0
    assert not (loop.state / "loop/costs.reported").exists()


def test_a_canary_launch_row_carries_the_mark(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(ledger_call("canary-launch", "a1", 1, "t1", canary=True))
    ledger.append(ledger_call("canary-launch", "a1", 1, "t1", canary=True))
    ledger.append(ledger_call("main-launch", "a2", 1, "t2"))
    rows = {r["session_id"]: r for r in costs.launch_rows(tmp_path / "ledger.jsonl", set(), "p")}
    assert rows["canary-launch"]["canary"] is True and rows["canary-launch"]["calls"] == 2
    assert "canary" not in rows["main-launch"]


# A Claude stand-in for token_in_env: signed in, and a stream-json run that reports its cost.
DIRECT_CLAUDE = """#!/bin/sh
[ "$1" = auth ] && exit 0
cat > /dev/null
echo '{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-5"}'
echo '{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.1234,'\\
'"usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":300,'\\
'"output_tokens":40},"result":"done","session_id":"s1"}'
"""


def test_a_token_in_env_launch_is_costed_from_its_own_events(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """No gateway, so no ledger rows: the ended launch's ``events.jsonl`` gives one row (the
    harness's ``total_cost_usd``), reported like the gateway's, once; it counts toward caps."""
    claude = claude_stand_in(short_tmp, DIRECT_CLAUDE)
    loop = make_loop_kit(
        short_tmp, server, admin, SUBMITTING_AGENT, token_in_env=True,
        harness_paths={"claude": str(claude)},
    )  # fmt: skip
    loop.write_config(harness="claude")
    loop.task()
    result = loop.once()
    assert result.returncode == 0 and "exit_code: 0" in result.stderr, result.stderr
    [final] = loop.records("finished")
    ledger = loop.state / "loop/harness-ledger.jsonl"
    [row] = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert row["session"] == final["launch_id"] and row["attempt"] == final["attempt"]
    assert row["usd"] == 0.1234 and "usd_estimated" not in row
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (120, 300, 40)
    assert row["source"] == "harness_events" and row["role"] == "impl"
    # Reported after the poll, like the gateway's rows; a later pass sends nothing again.
    [sent] = costs.launch_rows(ledger, set(), loop.project)
    assert (loop.state / "loop/costs.reported").read_text().split() == [costs.identity(sent)]
    assert _report(loop) == dict.fromkeys(
        ("accepted", "duplicates", "rejected", "quarantined", "pending"), 0
    )
    assert sent["usd"] == 0.1234 and sent["source"] == "harness_events"
    config = load_config(loop.config)
    assert admission.spent_24h(ledger, "impl", row["at_ms"]) == 0.1234
    record = LaunchRecord.from_json(final)  # the dead-launch path finds it already recorded
    assert costs.record_harness_cost(config, loop.state / "loop", record, short_tmp, 0) is None


def test_a_direct_run_that_hits_a_rate_limit_exhausts_its_vendor(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """No gateway saw the 429: the stream's rejected ``rate_limit_event`` marks Claude exhausted
    in ``vendors.json`` until its reset, so the next claim goes to the fallback vendor."""
    reset = int(time.time()) + 3600
    claude = claude_stand_in(
        short_tmp,
        '#!/bin/sh\n[ "$1" = auth ] && exit 0\ncat > /dev/null\n'
        'echo \'{"type":"rate_limit_event","rate_limit_info":'
        f'{{"status":"rejected","resetsAt":{reset}}}}}\'\n'
        'echo \'{"type":"result","subtype":"error","is_error":true,'
        '"api_error_status":429,"total_cost_usd":0,"usage":{}}\'\nexit 1\n',
    )
    loop = make_loop_kit(
        short_tmp, server, admin, SUBMITTING_AGENT, token_in_env=True,
        harness_paths={"claude": str(claude)},
    )  # fmt: skip
    agent = loop.fall_back_to_the_agent()
    loop.write_config(harness="claude")
    task = loop.task()
    first = loop.once()
    assert first.returncode == 0, first.stderr
    assert "claude hit a rate limit; exhausted until " in first.stderr, first.stderr
    vendors = json.loads((loop.state / "vendors.json").read_text())
    assert vendors["exhausted_until"]["claude"] == reset * 1000
    loop.put_back(task["id"])  # the coordinator backs it off after an attempt without a submission
    second = loop.once()
    assert "implementer vendor skipped: claude" in second.stderr, second.stderr
    assert loop.show(task["id"])["work_status"] == "waiting_review", loop.tails()
    finals = sorted(loop.records("finished"), key=lambda r: r["recorded_ms"])
    assert [r["vendor"]["harness"] for r in finals] == ["claude", agent]
