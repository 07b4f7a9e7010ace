"""The landing queue at team scale: `--changes` approved trivial changes (each touching its own
file) drained by the real `agentc-integrator run` through the coordinator's queue, each
landing's required check taking `--check-seconds`, with the target still and then moving.

A real `agent-coordinator-server serve` (SQLite) and a real bare repository; every change is
created, implemented, submitted and approved through the real agent CLI (the integrator tests'
kit), all before the integrator starts, so they wait in the queue together. With
`--move-every S`, another writer pushes a commit of its own to the target every S seconds while
the integrator drains: each push that lands between a landing's build and its push makes that
push fail its compare-and-swap, and the landing is rebuilt and checked again.

Reported per run: the drain time (integrator start to the last change settled) and landings
per minute, the changes not landed (sent back or held), the target moves made and the ones the
integrator met (`target_moved` reports), and each change's time in the queue to its landing
(the integration activity's `completed_at`), p50 and p95. Every change is approved before the
integrator starts, so that time counts from the later of its approval (`approved_at` in the
queue) and the integrator's start: the setup's own minutes are not queue time. The machine's
core count and load average (before and after) are printed with the figures.

    uv run python bench/landing.py [--changes 50] [--check-seconds 5] [--move-every 10]
        [--batch 1]
    (--move-every 0: the still run only; --batch N: the integrator's `landing_batch`)

Not a test: it asserts nothing; docs/benchmarks.md keeps the latest figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.client.kit import admin_get  # noqa: E402
from tests.integrator.kit import Setup, clean_env, make_setup  # noqa: E402
from tests.kit.live import live_server  # noqa: E402


def _s(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _approve_all(s: Setup, count: int) -> list[str]:
    """Each change's task filed by a person (agents' would count against a weekly budget),
    implemented and submitted by a worker of its own, approved by the reviewer."""
    tasks = []
    for i in range(count):
        made = s.admin.post(
            f"/api/v1/projects/{s.project_id}/tasks",
            json={"title": f"change {i}", "acceptance_criteria": ["done"]},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        made.raise_for_status()
        task_id = made.json()["data"]["task"]["id"]
        s.submit({f"change_{i:03d}.txt": f"change {i}\n"}, task_id=task_id, approve=True)
        tasks.append(task_id)
    return tasks


def _mover(s: Setup, every: float, stop: threading.Event, moves: list[str]) -> None:
    """Another writer: a commit of its own on the target every ``every`` seconds (a push that
    loses the race with a landing is made again on the new target)."""
    n = 0
    while not stop.wait(every):
        n += 1
        for _ in range(5):
            try:
                moves.append(s.push_to_target({f"elsewhere_{n:03d}.txt": f"{n}\n"}, f"move {n}"))
                break
            except subprocess.CalledProcessError:
                continue


def _drain(s: Setup, tasks: list[str], proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Until no change waits for integration any more (landed: done; sent back: ready or
    blocked; held for a person: waiting_review)."""
    while any(s.task(t)["work_status"] == "waiting_integration" for t in tasks):
        if proc.poll() is not None:
            raise SystemExit(f"agentc-integrator exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit("the queue did not drain in time")
        time.sleep(1)


def one_run(
    root: Path, changes: int, check_seconds: float, move_every: float, batch: int = 1
) -> dict[str, Any]:
    (root / "coordinator").mkdir(parents=True)
    with live_server(str(root / "coordinator" / "db.sqlite3"), root / "coordinator") as live:
        admin = live.admin_client()
        try:
            s = make_setup(root / "project", live.url, admin)
            s.write_config(
                {"unit": ["/bin/sh", "-c", f"sleep {check_seconds}"]}, landing_batch=batch
            )
            tasks = _approve_all(s, changes)
            queued = admin_get(admin, f"/api/v1/projects/{s.project_id}/integration/queue")
            approved = {i["task_id"]: _s(i["approved_at"]) for i in queued["items"]}
            assert len(approved) == changes, f"{len(approved)} of {changes} queued"
            stop, moves = threading.Event(), list[str]()
            mover = None
            if move_every > 0:
                mover = threading.Thread(target=_mover, args=(s, move_every, stop, moves))
                mover.start()
            started, started_wall = time.monotonic(), time.time()
            log = root / "integrator.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(s.argv("run"), stdout=out, stderr=out, env=clean_env())
            try:
                _drain(s, tasks, proc, deadline=started + 120 + changes * (check_seconds + 30))
            except SystemExit as stop_early:
                tail = log.read_text(errors="replace").splitlines()[-20:]
                raise SystemExit("\n".join([str(stop_early.code), *tail])) from None
            finally:
                drained = time.monotonic() - started
                stop.set()
                if mover is not None:
                    mover.join()
                proc.terminate()
                proc.wait(timeout=60)
            latencies, settled = [], []
            for t in tasks:
                act = s.landing(t)
                if act.get("completed_at"):
                    settled.append(_s(act["completed_at"]) - started_wall)
                    if not act.get("sent_back"):
                        latencies.append(_s(act["completed_at"]) - max(approved[t], started_wall))
            if len(settled) == changes:  # the coordinator's stamps, not the 1 s polling
                drained = max(settled)
            events = [r["event"] for r in s.reports()]
            return {
                "changes": changes,
                "check_seconds": check_seconds,
                "move_every": move_every,
                "batch": batch,
                "drain_s": drained,
                "landed": len(latencies),
                "per_minute": len(latencies) / drained * 60,
                "not_landed": changes - len(latencies),
                "target_moves": len(moves),
                "target_moved_reports": events.count("target_moved"),
                "p50_s": statistics.median(latencies) if latencies else None,
                "p95_s": _p95(latencies) if len(latencies) > 1 else None,
            }
        finally:
            admin.close()


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--check-seconds", type=float, default=5.0)
    parser.add_argument("--move-every", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=1, help="landing_batch (1: off)")
    args = parser.parse_args()
    runs = [("target still", 0.0)]
    if args.move_every > 0:
        runs.append((f"target moving every {args.move_every:g} s", args.move_every))
    load_before, rows = load_average(), []
    with tempfile.TemporaryDirectory(prefix="agentc-bench-landing-") as tmp:
        for n, (label, every) in enumerate(runs):
            where = Path(tmp) / f"run-{n}"
            row = one_run(where, args.changes, args.check_seconds, every, args.batch)
            rows.append((label, row))
            print(label, row, flush=True)
    print()
    print(
        f"landing queue: {args.changes} changes, {args.check_seconds:g} s check, "
        f"batch {args.batch}, "
        f"{os.cpu_count()} cores, load average {load_before} before, {load_average()} after"
    )
    print(
        "| run | landed | drain | landed / min | not landed | target moves (met) "
        "| queue → landed p50 | p95 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, r in rows:
        print(
            f"| {label} | {r['landed']}/{r['changes']} | {r['drain_s']:.0f} s | "
            f"{r['per_minute']:.1f} | {r['not_landed']} | {r['target_moves']} "
            f"({r['target_moved_reports']}) | {_cell(r['p50_s'])} | {_cell(r['p95_s'])} |"
        )


if __name__ == "__main__":
    main()
