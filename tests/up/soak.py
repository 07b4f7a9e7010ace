"""The whole-system soak of issue 27: ``agentc up --harness claude`` left to work, with faults
injected into its real programs, and a person's paging configuration watching it.

Everything is real but the model: ``agentc up`` (coordinator, model gateway, egress proxy,
supervisor loop, integrator) runs as root on a state directory of its own, Claude Code is the
harness, and a scripted provider stands in for Anthropic's API (:class:`SoakProvider`: each
task's implementer writes the task's own file, commits and submits through the agent CLI). A
person approves each review (``agentc up`` as root has no agent reviews) and, once, reads the
digest.

**Simulated time.** One tick (``Pace.tick`` real seconds) is ten simulated minutes: at each tick
the paging check runs once (``agentc.attention.watch.run``, the code of ``agentc-attention
check``, with its own configuration pointed at ``up``'s project, credential, heartbeat and
integrator reports, pages into a JSON-lines file), as a host's timer would run it every ten
minutes. The programs keep their own real intervals; the check's limits are scaled to the tick
(the red target blocks for 30 simulated minutes, the digest is neglected after 12 simulated
hours). The heartbeat limit is the setting's own floor in real seconds (15 s, three of the
loop's 5-s heartbeats).

**The faults**, one after another, each into the real program:

1. *supervisor*: SIGKILL of the supervisor loop while its launch runs (Claude's last request
   held by the provider, after the agent submitted). ``up`` itself is held stopped (SIGSTOP)
   until the heartbeat has paged, as a slow restart would be; then it starts the loop again,
   which settles the dead launch (records its patch and run) and goes on.
2. *coordinator*: SIGKILL of the coordinator, ``up`` held until the check has paged, then ``up``
   starts it again; the loop and the integrator ride it out.
3. *429 burst*: the provider answers every model request 429 for ``Pace.burst`` seconds (its
   reset headers at the burst's end); the gateway marks the vendor exhausted, the loop's
   heartbeat says so during the launch, Claude waits the reset out and finishes.
4. *red check*: a commit that breaks the sample's tests is pushed to the target; the next
   candidate's checks fail, the integrator finds the target itself red and holds the task;
   after the page, a fix is pushed and the task lands on the new target.
5. *unread digest*: nobody reads the digest for 12 simulated hours; after the page a person
   opens the project's Attention page in the console.

Each must page exactly once and be noted recovered exactly once; nothing else may page. The
soak ends with every task done, no attempt held, no launch left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import tomllib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agentc.attention import watch
from agentc.attention.config import AttentionConfig
from agentc.files.toml import dump_toml
from agentc.testing.provider import RecordedRequest, ScriptedProvider
from agentc.testing.script import Failure, Pause, RunCall, Turn, Usage, parse_script
from tests.kit.changes import git
from tests.supervisor.kit import HARNESS_BIN
from tests.up.kit import Runner, admin_client, free_port, stop

# The task's number, from its description in the prompt (its title also reaches commit subjects,
# which Claude's context lists).
TASK = re.compile(r"Soak task number (\d+)\.")
USAGE = Usage(input_tokens=1200, output_tokens=40)
FAULTS = ("heartbeat", "coordinator", "vendor:claude", "target", "neglect")


def submit_command(n: int) -> str:
    """The implementer's one command for task ``n``: its own file, a commit, the submission."""
    evidence = json.dumps(
        {
            "summary": f"note {n} added",
            "acceptance_evidence": [{"criterion": "the note exists", "evidence": f"soak/{n}.txt"}],
        }
    )
    return (
        f"cd agentc-checkout && mkdir -p soak && echo {n} > soak/{n}.txt && git add soak && "
        f"git commit --quiet -m 'soak note {n}' && printf '%s' '{evidence}' > \"$TMPDIR/s.json\" "
        '&& agent-coordinator submissions code --checkout "$PWD" --input "$TMPDIR/s.json" '
        '--json > "$TMPDIR/submitted.json"'
    )


def _after_tool(body: Any) -> bool:
    """Whether the conversation already holds the agent's tool call (it ran the command)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages or [])


class SoakProvider(ScriptedProvider):
    """Anthropic's API as the soak's Claude sees it: the first request of a task's conversation
    runs :func:`submit_command`, the one after it ends the conversation. ``hold(n)``: task
    ``n``'s last request stops mid-stream at the gate ``hold`` (``paused("hold")`` is set);
    ``burst(n, seconds)``: from task ``n``'s last request on, every request is a 429 until
    ``seconds`` later (the reset its headers name)."""

    def __init__(self, record_path: Path | None = None) -> None:
        super().__init__(parse_script({"turns": []}), record_path=record_path)
        self.held: int | None = None
        self.limited: tuple[int, float] | None = None
        self.burst_end = 0.0

    def hold(self, n: int) -> None:
        self.held = n

    def burst(self, n: int, seconds: float) -> None:
        self.limited = (n, seconds)

    def _turn_for(self, rec: RecordedRequest) -> Turn:
        if not rec.main:
            return self.script.side
        found = TASK.search(json.dumps(rec.body))
        n = int(found.group(1)) if found else 0
        last = _after_tool(rec.body)
        with self._lock:
            if last and self.limited is not None and self.limited[0] == n:
                self.burst_end, self.limited = time.time() + self.limited[1], None
            if time.time() < self.burst_end:
                return Turn(failure=Failure(kind="rate_limit", reset_at=int(self.burst_end) + 1))
            if not last:
                return Turn(
                    tool_calls=[RunCall(tool="run", command=submit_command(n))], usage=USAGE
                )
            if self.held == n:
                self.held = None
                return Turn(
                    text="Submitted.", pause=Pause(after_events=1, gate="hold", seconds=600)
                )
        return Turn(text="Submitted.", usage=Usage(input_tokens=30, output_tokens=5))


@dataclass
class Pace:
    """How fast the soak goes: ``tick`` real seconds are ten simulated minutes; it runs at
    least ``hours`` simulated hours; ``extra`` tasks beyond the faults' own are filed one per
    fault; ``burst`` is the 429 burst's length in real seconds."""

    tick: float = 0.5
    hours: float = 15.0
    extra: int = 1
    burst: float = 12.0
    timeout: float = 900.0


@dataclass
class Soak:
    workdir: Path
    pace: Pace = field(default_factory=Pace)
    say: Callable[[str], None] = print

    def __post_init__(self) -> None:
        self.state = self.workdir / ".agentc"
        self.pages = self.workdir / "pages.jsonl"
        self.runner = Runner(self.workdir)
        self.tasks: dict[int, str] = {}  # number -> task id
        self.ticks = 0
        self.codes: list[int] = []
        self.errors: list[str] = []
        self.faults: list[dict[str, Any]] = []
        self.approved = 0
        self.stopping = threading.Event()
        self.started = 0.0
        self.proc: subprocess.Popen[str] | None = None
        self.held_attempt: str | None = None
        self.landed = 0
        self.held_run: dict[str, Any] | None = None

    # -- running it ----------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.started = time.monotonic()
        self.provider = SoakProvider(self.workdir / "provider.jsonl")
        with self.provider:
            self.start_up()
            ticker = threading.Thread(target=self.tick_loop, daemon=True)
            ticker.start()
            try:
                self.inject()
                self.finish()
            finally:
                self.stopping.set()
                ticker.join(timeout=60)
                self.admin.close()
                assert self.proc is not None
                os.kill(self.proc.pid, signal.SIGCONT)  # never left held
                out = stop(self.proc, timeout=180)
                self.say(f"soak: agentc up stopped ({self.proc.returncode})")
                if self.proc.returncode != 0:
                    self.errors.append(f"agentc up exited {self.proc.returncode}: {out[-2000:]}")
        return self.summary()

    def start_up(self) -> None:
        env = self.runner.env()
        env["PATH"] = f"{HARNESS_BIN}:{env['PATH']}"
        env.update(
            ANTHROPIC_API_KEY="sk-ant-" + uuid.uuid4().hex, ANTHROPIC_BASE_URL=self.provider.url
        )
        self.port = free_port()
        argv = ("up", "--harness", "claude", "--port", str(self.port), "--no-live")
        self.proc = self.runner.start(*argv, env=env)
        self.wait(lambda: "children" in self.record(), "agentc up to start", 180)
        self.project = str(self.record()["project_id"])
        self.admin = admin_client(self.state)
        self.config = self.write_config()
        self.token = (self.state / "credentials/attention.token").read_text().strip()
        self.say(f"soak: agentc up runs (pid {self.proc.pid}), project {self.project}")

    def write_config(self) -> AttentionConfig:
        """A person's paging configuration for ``up``'s project: ``up``'s own sources, the
        limits scaled to the tick, pages into ``pages.jsonl``."""
        mine = tomllib.loads((self.state / "attention.toml").read_text())
        minutes = self.pace.tick / 60  # real minutes per simulated ten
        checks = {
            **mine["checks"],
            "heartbeat_max_age_seconds": 15,
            "vendor_limit_minutes": 0,
            "target_block_minutes": 3 * minutes,
            "target_repage_minutes": 10_000,
            "neglect_days": 72 * self.pace.tick / 86_400,  # 12 simulated hours
            "lease_overdue_minutes": 0,
        }
        tables = {
            (): {**{k: v for k, v in mine.items() if not isinstance(v, dict)},
                 "state_dir": str(self.workdir / "paging")},
            ("log",): {"path": str(self.pages)},
            ("checks",): checks,
        }  # fmt: skip
        path = self.workdir / "paging.toml"
        path.write_bytes(dump_toml(tables))
        path.chmod(0o600)
        return AttentionConfig.load(path)

    def tick_loop(self) -> None:
        """Every tick: the paging check, and a person approving the reviews that wait."""
        while not self.stopping.is_set():
            due = time.monotonic() + self.pace.tick
            try:
                self.codes.append(
                    watch.run(
                        self.config, self.token, lambda: time.time_ns() // 1_000_000,
                        out=lambda _line: None,
                    )
                )  # fmt: skip
            except Exception as exc:  # a soak records every failure, and goes on
                self.errors.append(f"check at tick {self.ticks}: {exc!r}")
            self.approve()
            self.ticks += 1
            self.stopping.wait(max(0.0, due - time.monotonic()))

    def approve(self) -> None:
        base = f"/api/v1/projects/{self.project}"
        try:
            waiting = self.get(f"{base}/tasks?work_status=waiting_review&limit=200")["items"]
            for task in waiting:
                flow = self.get(f"{base}/tasks/{task['id']}/workflow")
                for act in flow["activities"]:
                    if (
                        act["kind"] in ("either_review", "human_review")
                        and act["state"] == "queued"
                    ):
                        self.post(
                            f"{base}/workflow-activities/{act['id']}/review",
                            {"submission_id": act["submission_id"], "decision": "approved",
                             "summary": "Looks right.", "findings": []},
                        )  # fmt: skip
                        self.approved += 1
        except (httpx.HTTPError, KeyError, ValueError):
            pass  # the coordinator is down or restarting: the next tick tries again

    # -- the faults ------------------------------------------------------------------------------

    def inject(self) -> None:
        self.supervisor_killed()
        self.coordinator_killed()
        self.burst_of_429()
        self.red_target()
        self.digest_unread()

    def fault(
        self, name: str, key: str, act: Callable[[], None], settle: Callable[[], None]
    ) -> None:
        start = self.ticks
        self.say(f"soak: fault {name} at simulated {self.hours():.1f} h")
        act()
        # the digest's page waits for its 72 ticks; every other within a few
        slack = 80 * self.pace.tick
        self.wait(lambda: self.paged(key, "failing"), f"{key} to page", 120 + slack)
        settle()
        self.wait(lambda: self.paged(key, "recovered"), f"{key} to recover", 300 + slack)
        self.faults.append({"fault": name, "key": key, "ticks": self.ticks - start})

    def supervisor_killed(self) -> None:
        n = self.file_task()
        self.provider.hold(n)
        for _ in range(self.pace.extra):
            self.file_task()

        def act() -> None:
            self.wait(self.provider.paused("hold").is_set, "the held launch", 240)
            launch = [r for r in self.launches() if r.get("pid")]
            self.held_attempt = launch[0]["attempt"] if launch else None
            self.hold_up(True)
            os.killpg(self.child("supervisor"), signal.SIGKILL)
            self.provider.gate("hold").set()

        self.fault("supervisor SIGKILL mid-launch", "heartbeat", act, lambda: self.hold_up(False))

    def coordinator_killed(self) -> None:
        for _ in range(self.pace.extra):
            self.file_task()

        def act() -> None:
            self.hold_up(True)
            os.killpg(self.child("coordinator"), signal.SIGKILL)

        self.fault("coordinator killed and restarted", "coordinator", act,
                   lambda: self.hold_up(False))  # fmt: skip

    def burst_of_429(self) -> None:
        def act() -> None:
            self.provider.burst(self.file_task(), self.pace.burst)

        self.fault("429 burst from the model provider", "vendor:claude", act, lambda: None)

    def red_target(self) -> None:
        clone = self.workdir / "clone"
        remote = str(self.state / "remote.git")
        git(self.workdir, "clone", "--quiet", remote, str(clone))
        calc = clone / "calc.py"
        good = calc.read_text()

        def push(text: str, message: str) -> None:
            calc.write_text(text)
            git(clone, "commit", "--quiet", "-am", message)
            git(clone, "push", "--quiet", "origin", "HEAD:main")

        def act() -> None:
            git(clone, "pull", "--quiet", "--rebase", "origin", "main")
            push(good.replace("a + b", "a - b"), "Break add (a red check on the target)")
            self.file_task()

        def fix() -> None:
            git(clone, "pull", "--quiet", "--rebase", "origin", "main")
            push(good, "Mend add")

        self.fault("a red check on the target", "target", act, fix)

    def digest_unread(self) -> None:
        def read() -> None:  # a person opens the project's Attention page
            got = self.admin.get(f"/console/projects/{self.project}/attention")
            got.raise_for_status()

        self.fault("the digest left unread", "neglect", lambda: None, read)

    def finish(self) -> None:
        base = f"/api/v1/projects/{self.project}"

        def done() -> bool:
            if self.ticks < self.pace.hours * 6:
                return False
            tasks = [self.get(f"{base}/tasks/{t}") for t in self.tasks.values()]
            self.landed = sum(t["work_status"] == "done" for t in tasks)
            return self.landed == len(tasks) and not self.launches()

        self.wait(done, "every task to land", self.pace.timeout)
        if self.held_attempt is not None:  # recorded by the loop that settled the dead launch
            run = self.get(f"{base}/attempts/{self.held_attempt}/artifacts/steps")
            self.held_run = {k: run.get(k) for k in ("ending", "why", "harness")}

    # -- helpers -----------------------------------------------------------------------------------

    def hold_up(self, held: bool) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP if held else signal.SIGCONT)

    def child(self, name: str) -> int:
        pid = self.record()["children"][name]
        assert isinstance(pid, int), (name, pid)
        return pid

    def record(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.state / "up.json").read_text())
        except (OSError, ValueError):
            return {}
        return data

    def launches(self) -> list[dict[str, Any]]:
        found = []
        for path in (self.state / "supervisor/loop/launches").glob("*.json"):
            try:
                found.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return found

    def file_task(self) -> int:
        n = len(self.tasks) + 1
        body = {
            "title": f"soak-{n}: add note {n}",
            "description": f"Soak task number {n}. Add the file soak/{n}.txt holding {n}.",
            "acceptance_criteria": ["the note exists"],
        }
        self.tasks[n] = self.post(f"/api/v1/projects/{self.project}/tasks", body)["task"]["id"]
        return n

    def get(self, path: str) -> Any:
        got = self.admin.get(path, timeout=5)
        got.raise_for_status()
        return got.json()["data"]

    def post(self, path: str, body: dict[str, Any]) -> Any:
        made = self.admin.post(
            path, json=body, headers={"Idempotency-Key": str(uuid.uuid4())}, timeout=10
        )
        made.raise_for_status()
        return made.json()["data"]

    def sent(self) -> list[dict[str, Any]]:
        if not self.pages.exists():
            return []
        return [json.loads(line) for line in self.pages.read_text().splitlines() if line]

    def paged(self, key: str, kind: str) -> bool:
        return any(
            p["kind"] == kind and (p["key"] == key or p["key"].startswith(key + ":"))
            for p in self.sent()
        )

    def hours(self) -> float:
        return self.ticks / 6

    def wait(self, check: Callable[[], Any], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"agentc up exited while waiting for {what}")
            try:
                if check():
                    return
            except (httpx.HTTPError, KeyError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"soak: timed out waiting for {what}:\n{self.logs()}")

    def logs(self) -> str:
        found = sorted((self.state / "logs").glob("*.log")) if self.state.exists() else []
        return "\n".join(f"{p.name}:\n{p.read_text()[-2500:]}" for p in found)

    def summary(self) -> dict[str, Any]:
        by_key: dict[str, list[str]] = {}
        for page in self.sent():
            by_key.setdefault(page["key"], []).append(page["kind"])
        return {
            "simulated_hours": round(self.hours(), 1),
            "real_seconds": round(time.monotonic() - self.started, 1),
            "tick_seconds": self.pace.tick,
            "checks": len(self.codes),
            "undelivered_runs": self.codes.count(watch.UNDELIVERED),
            "faults": self.faults,
            "pages": by_key,
            "pages_sent": sum(len(v) for v in by_key.values()),
            "tasks_filed": len(self.tasks),
            "tasks_landed": self.landed,
            "reviews_approved": self.approved,
            "held_attempt": self.held_attempt,
            "held_run": self.held_run,
            "errors": self.errors,
        }


def problems(summary: dict[str, Any]) -> list[str]:
    """What the soak's summary shows went wrong (nothing: it passed): each fault paged once
    and noted recovered once, nothing else paged, every page delivered, every task landed."""
    found = [f"error: {e}" for e in summary["errors"]]
    pages: dict[str, list[str]] = summary["pages"]
    for fault in FAULTS:
        keys = [k for k in pages if k == fault or k.startswith(fault + ":")]
        kinds = [kind for k in keys for kind in pages[k]]
        if len(keys) != 1 or kinds != ["failing", "recovered"]:
            found.append(
                f"{fault}: paged {dict((k, pages[k]) for k in keys)}, not once and recovered once"
            )
    others = [k for k in pages if not any(k == f or k.startswith(f + ":") for f in FAULTS)]
    if others:
        found.append(f"other pages: {dict((k, pages[k]) for k in others)}")
    if summary["undelivered_runs"]:
        found.append(f"{summary['undelivered_runs']} check runs left a page undelivered")
    if summary["tasks_landed"] != summary["tasks_filed"]:
        found.append(f"{summary['tasks_landed']} of {summary['tasks_filed']} tasks landed")
    if summary["simulated_hours"] < 15:
        found.append(f"only {summary['simulated_hours']} simulated hours")
    return found
