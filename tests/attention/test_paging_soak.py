"""Paging over 16 simulated hours: ``watch.run`` every simulated 10 minutes (the checker's clock
moved forward, the coordinator real over HTTP, pages into a [log] file), with the faults of
issue 27 injected one after another into what the checks read: the coordinator stopped and
restarted, the supervisor gone (its heartbeat stale), the model provider rate-limiting (the
loop's heartbeat names the vendor), a red target blocking a waiting task, the digest left
unread. Each fault is paged exactly once and noted recovered exactly once; nothing else pages.

This is the paging rules' own soak, on a moved clock; the whole-system soak (agentc up with the
faults in the real programs) is tests/up/test_up_soak.py (docs/attention.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agentc.attention import watch
from agentc.attention.config import AttentionConfig
from agentc.core.rules import rfc3339
from tests.attention.kit import Setup, claimed, new_task, set_review_mode, submit_code
from tests.kit.live import start_server

STEP_MS = 10 * 60_000
STEPS = 96  # 16 hours


def test_each_fault_is_paged_once_and_noted_recovered_once(
    lone_setup: Setup, sqlite_database: str, tmp_path: Path
) -> None:
    setup, server = lone_setup, lone_setup.server  # a coordinator of its own: it is restarted
    set_review_mode(server, setup.project_id, "none")
    task = new_task(server, setup.project_id, "waits behind the target")
    with claimed(server, setup.project_id, task) as (agent, attempt):
        submit_code(agent, setup.project_id, task, attempt)
    beat, reports, pages = (
        tmp_path / "hb.json",
        tmp_path / "reports.jsonl",
        tmp_path / "pages.jsonl",
    )
    config = AttentionConfig.load(
        setup.config(
            log={"path": str(pages)},
            checks={
                "heartbeat": str(beat),
                "integrator_reports": str(reports),
                "neglect_days": 0.5,  # 12 simulated hours without a read
                "target_block_minutes": 30,
                "target_repage_minutes": 24 * 60,
                "vendor_limit_minutes": 0,
                "lease_overdue_minutes": 0,
            },
        )
    )
    token = setup.token_file.read_text().strip()
    start = time.time_ns() // 1_000_000
    clock = {"now": start}
    live = {"server": server}
    codes: list[int] = []

    def heartbeat(**data: Any) -> None:
        body = {"pid": 1, "at_ms": clock["now"], "iteration": 1, "holds": {}, "vendors": []}
        beat.write_text(json.dumps({**body, **data}))

    def report(event: str, target: str) -> None:
        with reports.open("a") as fh:
            fh.write(
                json.dumps({"at": rfc3339(clock["now"]), "event": event, "target": target}) + "\n"
            )

    report("landed", "a" * 40)
    (tmp_path / "restart").mkdir()
    for step in range(STEPS):
        hour = step / 6
        if 2 <= hour < 3:  # the supervisor killed: its heartbeat stops
            pass
        elif 5 <= hour < 6:  # the provider answers 429: the loop names the vendor limited
            heartbeat(
                vendors=[{"name": "claude", "reason": None, "until_ms": clock["now"] + 900_000}]
            )
        else:
            heartbeat()
        if hour == 4:
            live["server"].stop()  # the coordinator stopped ...
        if hour == 4.5:  # ... and restarted on its port, same database
            port = int(live["server"].url.rsplit(":", 1)[1])
            live["server"] = start_server(sqlite_database, tmp_path / "restart", port=port)
        if hour == 7:
            report("target_red", "b" * 40)  # a red check on the target
        if hour == 9:
            report("landed", "c" * 40)  # fixed: the next verdict is on a new target
        codes.append(watch.run(config, token, lambda: clock["now"], out=lambda _line: None))
        clock["now"] += STEP_MS
    live["server"].stop()

    sent = [json.loads(line) for line in pages.read_text().splitlines()]
    by_key: dict[str, list[str]] = {}
    for page in sent:
        by_key.setdefault(page["key"], []).append(page["kind"])
    faults = {"heartbeat", "coordinator", "vendor:claude", f"target:{'b' * 12}", "neglect"}
    assert set(by_key) == faults, by_key
    for key in faults - {"neglect"}:
        assert by_key[key] == ["failing", "recovered"], (key, by_key[key])
    assert by_key["neglect"] == ["failing"]  # nobody read the digest: it still fails at the end
    assert 2 not in codes  # every page was delivered when it was made
    summary = {k: len(v) for k, v in by_key.items()}
    print(f"soak: {STEPS} checks over {STEPS * 10 / 60:g} simulated hours; pages {summary}")
