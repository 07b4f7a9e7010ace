"""Throughput through ``agentc up``: tasks landed per minute at several launches at once.

Run as root: ``uv run python bench/throughput.py [--tasks 40] [--agents 1,2,4]
[--claude-agents 1,2] [--json out.json]``. For each N, a throwaway unprivileged account (agent
reviews need one: a reviewer's nested sandbox cannot start under root) runs ``agentc up
--agents N --check 'sleep 2' --no-live`` in a fresh directory: the sample repository, the
coordinator, the supervisor loop with up to N launches at once, and the integrator, whose one
required check takes 2 s. The bench files ``--tasks`` tasks at once, each adding a file of its
own (an ``agentc-example`` block the bundled example agent follows), and watches the project
until every task is done (landed on the sample's main branch by the integrator). The same runs
with the real Claude Code binary (``--harness claude``) pointed at a scripted provider standing
in for Anthropic's API, offline: an implementer's first model turn writes a file named after its
launch, commits and submits through the agent CLI; a reviewer's returns a structured approval;
each conversation's second turn ends it.

Per run it prints: landed per minute (tasks over the time from the first filing to the last
landing), approved per minute (the same to the last approval: what the loop's launches hand
the integrator), the time from filed to landed (p50, p95; polled every 0.25 s), the median
time between two landings (the integrator lands one at a time), how long the run took, and
the 1-minute load average sampled every second during it (mean, max), with the machine's CPUs.
Nothing leaves the machine: everything listens on loopback. The account and what it runs are
removed however a run ends (Ctrl-C and SIGTERM included).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import signal
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import closing, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.supervisor.kit import HARNESS_BIN, create_user, delete_user  # noqa: E402
from tests.up.kit import (  # noqa: E402
    Runner,
    admin_client,
    free_port,
    processes_of,
    stop,
    wait_for,
)

from agentc.testing import wire  # noqa: E402
from agentc.testing.provider import RecordedRequest, ScriptedProvider  # noqa: E402
from agentc.testing.script import Turn, parse_script  # noqa: E402
from agentc.up.sample import plan_description  # noqa: E402

CHECK = "sleep 2"
CRITERION = "the note exists"
POLL_SECONDS = 0.25
RUN_TIMEOUT = 45 * 60
# The scripted Claude: an implementer's first turn (its launch id names its file).
SUBMIT = (
    "cd agentc-checkout && mkdir -p notes && echo noted > notes/$AGENT_COORDINATOR_SESSION.txt"
    ' && git add notes && git commit --quiet -m note && printf \'%s\' \'{"summary": "a note",'
    f' "acceptance_evidence": [{{"criterion": "{CRITERION}", "evidence": "notes/"}}]}}\''
    ' > "$TMPDIR/s.json" && agent-coordinator submissions code --checkout "$PWD"'
    ' --input "$TMPDIR/s.json" --json > "$TMPDIR/submitted.json"'
)
VERDICT = {
    "decision": "approve",
    "summary": "The note is there.",
    "findings": [],
    "criteria_evidence": [{"criterion": CRITERION, "evidence": "the diff adds one note"}],
    "amendment_decision": None,
}
USAGE = {"input_tokens": 1200, "output_tokens": 40}
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
APPROVED = ("waiting_integration", "done")


class RoutedProvider(ScriptedProvider):
    """The scripted provider answering each conversation by what it is, not by arrival order
    (several launches talk to it at once): a reviewer (offered ``StructuredOutput``) approves,
    an implementer submits; any conversation that already had an answer is ended."""

    def __init__(self) -> None:
        implement, review, done = parse_script(
            {
                "turns": [
                    {"tool_calls": [{"tool": "run", "command": SUBMIT}], "usage": USAGE},
                    {"tool_calls": [{"tool": "raw", "name": "StructuredOutput", "input": VERDICT}]},
                    {"text": "Done.", "usage": {"input_tokens": 30, "output_tokens": 5}},
                ]
            }
        ).expanded()
        super().__init__(parse_script({"turns": []}))
        self.implement, self.review, self.done = implement, review, done

    def _turn_for(self, rec: RecordedRequest) -> Turn:
        body = rec.body if isinstance(rec.body, dict) else {}
        if not rec.main:
            return self.script.side
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages):
            return self.done
        return self.review if "StructuredOutput" in wire.tool_names(body) else self.implement


@dataclass
class Result:
    harness: str
    agents: int
    tasks: int
    landed: int
    landed_per_minute: float
    approved_per_minute: float
    filed_to_landed_p50_s: float
    filed_to_landed_p95_s: float
    landing_gap_p50_s: float
    run_seconds: float
    load_mean: float
    load_max: float
    cpus: int


def _task_body(index: int) -> dict[str, Any]:
    files = {f"notes/note-{index:03d}.txt": f"note {index}\n"}
    return {
        "title": f"Add note {index}",
        "description": plan_description(f"Add note {index}.", files, f"Add note {index}"),
        "acceptance_criteria": [CRITERION],
    }


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def one_run(harness: str, agents: int, tasks: int, provider_url: str | None) -> Result:
    """One ``agentc up`` as a throwaway account, ``tasks`` filed at once, watched to the end;
    the account and everything it runs are gone afterwards, however the run ended."""
    user = create_user("agentc-tp")
    entry = pwd.getpwnam(user)
    proc: subprocess.Popen[str] | None = None
    try:
        work = Path(entry.pw_dir) / "bench"
        work.mkdir()
        os.chown(work, entry.pw_uid, entry.pw_gid)
        runner = Runner(work, user)
        env = runner.env()
        argv = ["up", "--agents", str(agents), "--check", CHECK, "--no-live"]
        argv += ["--port", str(free_port())]
        if harness == "claude":
            argv += ["--harness", "claude"]
            env["PATH"] = f"{HARNESS_BIN}:{env['PATH']}"
            env.update(ANTHROPIC_API_KEY="sk-ant-" + uuid.uuid4().hex)
            env.update(ANTHROPIC_BASE_URL=str(provider_url))
        proc = runner.start(*argv, env=env)
        return _measure(harness, agents, tasks, work / ".agentc", proc)
    finally:
        # A second Ctrl-C (or a SIGTERM) must not cut the cleanup short.
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
        try:
            _stop_all(proc, entry.pw_uid)
        finally:
            delete_user(user)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if subprocess.run(["id", user], capture_output=True).returncode == 0:
            print(f"throughput: could not remove the account {user}", file=sys.stderr)


def _stop_all(proc: subprocess.Popen[str] | None, uid: int) -> None:
    """``agentc up`` stopped as Ctrl-C stops it (the loop drains, then the integrator and the
    coordinator stop); whatever of the account still runs a minute later is killed."""
    if proc is not None and proc.poll() is None:
        try:
            stop(proc, timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    deadline = time.monotonic() + 60
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.5)
    for left in processes_of(uid):
        print(f"throughput: killing a leftover process: {left}", file=sys.stderr)
        with suppress(ProcessLookupError):
            os.kill(int(left.split()[0]), signal.SIGKILL)


def _measure(harness: str, agents: int, tasks: int, state: Path, proc: Any) -> Result:
    def ready() -> dict[str, Any] | None:
        if proc.poll() is not None:
            raise SystemExit(f"throughput: agentc up exited: {proc.communicate()[0][-3000:]}")
        record_path = state / "up.json"
        record = json.loads(record_path.read_text()) if record_path.exists() else None
        return record if record and record.get("children") else None

    record = wait_for(ready, 300, "agentc up to start")
    project = record["project_id"]
    filed: dict[str, float] = {}
    landed: dict[str, float] = {}
    approved: dict[str, float] = {}  # first seen approved (waiting for the integrator, or done)
    loads: list[float] = []
    with closing(admin_client(state)) as admin:
        began = time.time()
        for index in range(tasks):
            made = admin.post(
                f"/api/v1/projects/{project}/tasks",
                json=_task_body(index),
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )
            made.raise_for_status()
            filed[made.json()["data"]["task"]["id"]] = time.time()
        next_load = 0.0
        deadline = time.monotonic() + RUN_TIMEOUT
        while len(landed) < tasks and time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"throughput: agentc up exited: {proc.communicate()[0][-3000:]}")
            items = admin.get(f"/api/v1/projects/{project}/tasks?limit=200").json()["data"]
            now = time.time()
            for task in items["items"]:
                if task["id"] in filed and task["work_status"] in APPROVED:
                    approved.setdefault(task["id"], now)
                if task["id"] in filed and task["work_status"] == "done":
                    landed.setdefault(task["id"], now)
            if time.monotonic() >= next_load:
                loads.append(os.getloadavg()[0])
                next_load = time.monotonic() + 1.0
            time.sleep(POLL_SECONDS)
    waits = [landed[t] - filed[t] for t in landed]
    times = sorted(landed.values())
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    span = (max(landed.values()) - began) if landed else float("inf")
    return Result(
        harness=harness,
        agents=agents,
        tasks=tasks,
        landed=len(landed),
        landed_per_minute=round(len(landed) / span * 60, 2),
        approved_per_minute=round(
            len(approved) / (max(approved.values(), default=0) - began) * 60, 2
        ),
        filed_to_landed_p50_s=round(_percentile(waits, 0.5), 1) if waits else float("nan"),
        filed_to_landed_p95_s=round(_percentile(waits, 0.95), 1) if waits else float("nan"),
        landing_gap_p50_s=round(statistics.median(gaps), 1) if gaps else float("nan"),
        run_seconds=round(span, 1),
        load_mean=round(statistics.fmean(loads), 2) if loads else 0.0,
        load_max=round(max(loads), 2) if loads else 0.0,
        cpus=os.cpu_count() or 1,
    )


def _interrupted(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--agents", default="1,2,4", help="the example agent's runs (N,N,...)")
    parser.add_argument("--claude-agents", default="1,2", help="the scripted Claude's runs")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("throughput: run as root (it makes a throwaway account per run)")
    signal.signal(signal.SIGTERM, _interrupted)  # cleaned up as after a Ctrl-C
    results: list[Result] = []
    try:
        _run_all(args.agents, args.claude_agents, args.tasks, results)
    except (KeyboardInterrupt, httpx.HTTPError) as exc:
        raise SystemExit(f"throughput: stopped ({exc!r}); the account was removed") from None
    finally:
        _report(results, args.json)


def _run_all(example: str, claude: str, tasks: int, results: list[Result]) -> None:
    for agents in [int(n) for n in example.split(",") if n]:
        results.append(one_run("example", agents, tasks, None))
        print(json.dumps(asdict(results[-1])), flush=True)
    if claude:
        with RoutedProvider() as provider:
            for agents in [int(n) for n in claude.split(",") if n]:
                results.append(one_run("claude", agents, tasks, provider.url))
                print(json.dumps(asdict(results[-1])), flush=True)


def _report(results: list[Result], json_path: Path | None) -> None:
    print("harness  N  landed/min  approved/min  p50 s  p95 s  gap s  run s  load mean/max")
    for r in results:
        print(
            f"{r.harness:8} {r.agents:2} {r.landed_per_minute:10} {r.approved_per_minute:13}"
            f" {r.filed_to_landed_p50_s:6} {r.filed_to_landed_p95_s:6} {r.landing_gap_p50_s:6}"
            f" {r.run_seconds:6}  {r.load_mean}/{r.load_max}"
            f"  ({r.landed}/{r.tasks} landed, {r.cpus} CPUs)"
        )
    if json_path:
        json_path.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")


if __name__ == "__main__":
    main()
