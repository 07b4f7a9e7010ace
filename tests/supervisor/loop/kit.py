"""Test kit for the loop: a real coordinator, a bare origin, a personal-mode state tree, a
``command:`` agent, and ``agentc-supervisor run`` as a real subprocess."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.client.kit import admin_get, admin_project, issue_token, make_clone, write_credentials
from tests.kit.live import LiveServer
from tests.supervisor.kit import HARNESS_BIN, PORTABLE_PYTHON, Kit, make_kit

# A scripted agent: reads its prompt, edits, commits and submits through the agent CLI with no
# flags but --checkout and --input (everything else comes from the launch's environment).
SUBMITTING_AGENT = """#!/bin/sh
set -e
cat > "$TMPDIR/prompt.md"
echo '{"type": "agent", "step": "start"}'
cd agentc-checkout
echo hi > greeting.txt
git add greeting.txt
git commit --quiet -m greeting
PROMPT_SHA256=$(sha256sum < "$TMPDIR/prompt.md" | cut -c1-64)
cat > "$TMPDIR/submission.json" <<JSON
{"summary": "greeting added", "handoff": "prompt sha256 $PROMPT_SHA256",
 "acceptance_evidence": [{"criterion": "greeting exists", "evidence": "greeting.txt"}]}
JSON
agent-coordinator submissions code --checkout "$PWD" --input "$TMPDIR/submission.json" \\
    --json > "$TMPDIR/submitted.json"
echo '{"type": "agent", "step": "submitted"}'
"""
# The submitting agent, held at its start until the test lets it go ($TMPDIR/go: LoopKit.let_go).
GATED_AGENT = SUBMITTING_AGENT.replace(
    """echo '{"type": "agent", "step": "start"}'\n""",
    """echo '{"type": "agent", "step": "start"}'\n"""
    """while [ ! -e "$TMPDIR/go" ]; do sleep 0.1; done\n""",
    1,
)
# Prints one event, then hangs without another.
HANGING_AGENT = """#!/bin/sh
cat > /dev/null
echo '{"type": "agent", "step": "start"}'
exec sleep 600
"""


@dataclass
class LoopKit:
    kit: Kit
    live: LiveServer
    admin: httpx.Client
    project: str
    origin: Path
    agent: Path
    config: Path
    run: dict[str, Any]
    extra: str = ""
    top: dict[str, Any] = field(default_factory=dict)
    binding_url: str | None = None  # the loop's coordinator origin (default: the server's)
    user: str | None = None  # run the loop as this unprivileged account (reviews need one)
    clone: Path | None = None  # a working clone of the origin (the test's own pushes)
    binding: dict[str, Any] = field(default_factory=dict)  # more [run.binding] keys
    portable: bool = False  # run the loop (as root) with an interpreter any account can run
    repository_url: str | None = None  # the project's repository (default: the origin's path)

    @property
    def state(self) -> Path:
        return self.kit.state

    def fall_back_to_the_agent(self) -> str:
        """Make the kit's ``command:`` agent the fallback vendor (``[health.fallback]``, written
        by the next :meth:`write_config`); returns its harness name."""
        agent = f"command:{self.agent}"
        self.extra = f'[health.fallback]\nharness = "{agent}"\nmodel = "default"\n'
        return agent

    def write_config(self, **run: Any) -> None:
        values = {**self.run, **run}
        top = {
            "mode": "personal",
            "state_dir": str(self.kit.state),
            "egress_listen": "",
            "gateway_listen": "",
            "coordinator_listen": self.live.url.removeprefix("http://"),
            **self.top,
        }
        tables = {k: v for k, v in top.items() if isinstance(v, dict)}
        lines = [f"{k} = {json.dumps(v)}" for k, v in top.items() if k not in tables]
        for name, table in tables.items():
            lines += [f"[{name}]", *(f"{k} = {json.dumps(v)}" for k, v in table.items())]
        lines += [
            "[run]",
            *(f"{k} = {json.dumps(v)}" for k, v in values.items()),
            "[run.binding]",
            f'service_url = "{self.binding_url or self.live.url}"',
            f'project_id = "{self.project}"',
            *(f"{k} = {json.dumps(v)}" for k, v in self.binding.items()),
            f"[setup.{self.project}]",
            f'repository_url = "{self.repository_url or self.origin}"',
        ]
        self.config.write_text("\n".join(lines) + "\n" + self.extra)

    def argv(self, *args: str) -> list[str]:
        tail = ["-m", "agentc.supervisor.cli", "--config", str(self.config), *args]
        if self.user is None:
            return [*PORTABLE_PYTHON, *tail] if self.portable else [sys.executable, *tail]
        entry = pwd.getpwnam(self.user)
        as_user = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}"]
        return [*as_user, "--clear-groups", *PORTABLE_PYTHON, *tail]

    def env(self) -> dict[str, str]:
        home = "/root" if self.user is None else pwd.getpwnam(self.user).pw_dir
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home}

    def once(self, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv("run", "--once"),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )

    def start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv("run", "--once"),
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
        )

    def run_forever(self) -> subprocess.Popen[str]:
        """``run`` without ``--once`` (it polls until SIGTERM); its output goes to
        :attr:`log` (a pipe nobody reads would fill and stop it)."""
        with self.log.open("w") as log:
            return subprocess.Popen(
                self.argv("run"), env=self.env(), stdout=log, stderr=log, text=True, cwd="/"
            )

    @property
    def log(self) -> Path:
        """The output of :meth:`run_forever`'s loop."""
        return self.kit.root / "loop.log"

    def running(self, count: int) -> list[dict[str, Any]]:
        """The launch records whose harness runs (a pid, and its first event written), once
        there are ``count`` of them (else none)."""
        found = []
        for record in self.records():
            events = self.state / "impl/runs" / record["launch_id"] / "events.jsonl"
            if record.get("pid") and events.exists() and events.stat().st_size:
                found.append(record)
        return found if len(found) == count else []

    def let_go(self, record: dict[str, Any]) -> None:
        """Let a held launch (:data:`GATED_AGENT`) go on."""
        (self.state / "impl/runs" / record["launch_id"] / "tmp/go").touch()

    def heartbeat(self) -> dict[str, Any]:
        beat: dict[str, Any] = json.loads((self.state / "loop/heartbeat.json").read_text())
        return beat

    def stop(self, proc: subprocess.Popen[str]) -> str:
        """SIGTERM to :meth:`run_forever`'s loop (if it still runs); its output once it ended."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        return self.log.read_text()

    def recorded(self, kind: str) -> list[str]:
        """The records (attempts) of the project's audit events of ``kind``, one per event."""
        seen = admin_get(self.admin, f"/api/v1/projects/{self.project}/events?limit=200")
        return [e["record_id"] for e in seen["items"] if e["kind"] == kind]

    def task(
        self,
        title: str = "add a greeting",
        description: str | None = None,
        criteria: tuple[str, ...] = ("greeting exists",),
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"title": title, "acceptance_criteria": list(criteria)}
        if description is not None:
            body["description"] = description
        resp = self.admin.post(
            f"/api/v1/projects/{self.project}/tasks",
            json=body,
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert resp.status_code == 201, resp.text
        task: dict[str, Any] = resp.json()["data"]["task"]
        return task

    def show(self, task_id: str) -> dict[str, Any]:
        data: dict[str, Any] = admin_get(
            self.admin, f"/api/v1/projects/{self.project}/tasks/{task_id}"
        )
        task: dict[str, Any] = data.get("task", data)
        return task

    def put_back(self, task_id: str, reason: str = "try again now") -> dict[str, Any]:
        """A person puts the task back (the coordinator backs a task off after an attempt
        without a submission; this offers it again at once, its count reset)."""
        revision = self.show(task_id)["revision"]
        resp = self.admin.post(
            f"/api/v1/projects/{self.project}/tasks/{task_id}/unblock",
            json={"expected_revision": revision, "reason": reason},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert resp.status_code == 200, resp.text
        task: dict[str, Any] = resp.json()["data"]
        return task

    def submission(self, task_id: str) -> dict[str, Any]:
        """The task's current submission (from its workflow view)."""
        data: dict[str, Any] = admin_get(
            self.admin, f"/api/v1/projects/{self.project}/tasks/{task_id}/workflow"
        )
        current: dict[str, Any] = data["submission"]
        return current

    def attempt(self, attempt_id: str) -> dict[str, Any]:
        data: dict[str, Any] = admin_get(
            self.admin, f"/api/v1/projects/{self.project}/attempts/{attempt_id}"
        )
        return data

    def records(self, sub: str = "launches") -> list[dict[str, Any]]:
        """The loop's records in ``sub``; one the running loop removes while read is skipped."""
        folder = self.state / "loop" / sub
        found = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                found.append(json.loads(path.read_text()))
            except FileNotFoundError:
                continue
        return found

    def tails(self) -> str:
        """The kept logs of launches that ended without a submission (for failure messages)."""
        folder = self.state / "loop/unsubmitted"
        if not folder.is_dir():
            return ""
        return "\n".join(f"{p}:\n{p.read_text()[-4000:]}" for p in sorted(folder.glob("*/*")))

    def leftovers(self) -> list[str]:
        found = []
        for role_dir in ("impl/runs", "impl/clones", "rev/runs", "rev/clones", "loop/sessions"):
            folder = self.state / role_dir
            if folder.is_dir():
                found += [f"{role_dir}/{p.name}" for p in folder.iterdir()]
        return found

    def wait_for(self, check: Any, timeout: float = 120, why: Any = None) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = check()
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting: {why() if callable(why) else why}")


def write_agent(root: Path, text: str) -> Path:
    """The ``command:`` agent ``<root>/agent/agent.sh`` (its directory is bound back into the
    launch)."""
    (root / "agent").mkdir()
    program = root / "agent" / "agent.sh"
    program.write_text(text)
    os.chmod(program, 0o755)  # noqa: S103 - the agent must be executable
    return program


def claude_stand_in(root: Path, script: str) -> Path:
    """``<root>/bin/claude``: a program standing in for Claude Code (its directory is bound back
    into the launch)."""
    program = root / "bin/claude"
    program.parent.mkdir()
    program.write_text(script)
    program.chmod(0o755)
    return program


def agent_run(program: Path, **more: Any) -> dict[str, Any]:
    """The ``[run]`` table of a test loop running ``program`` as its agent."""
    return {
        "harness": f"command:{program}",
        "allow_insecure_loopback": True,
        "min_free_mib": 1,
        "drain_seconds": 2,
        **more,
    }


def ledger_call(
    launch: str, attempt: str | None, generation: int, task: str, **extra: Any
) -> dict[str, Any]:
    """One model call of ``launch`` as the gateway's ledger keeps it ($0.50 on claude)."""
    return {
        "at_ms": 1_800_000_000_000,
        "session": launch,
        "attempt": attempt,
        "generation": generation,
        "role": "impl",
        "task": task,
        "project": None,
        "upstream": "claude",
        "model": "claude-sonnet-5",
        "input_tokens": 1200,
        "cache_write_tokens": 0,
        "cache_read_tokens": 100,
        "output_tokens": 40,
        "usd": 0.5,
        "usd_for_caps": 0.5,
        "status": 200,
        **extra,
    }


def make_loop_kit(
    root: Path,
    live: LiveServer,
    admin: httpx.Client,
    agent: str,
    user: str | None = None,
    policy: dict[str, Any] | None = None,
    **top: Any,
) -> LoopKit:
    """A loop kit on a new project (with the given policy) its credential is granted; with
    ``user``, everything the loop reads or writes belongs to that account (the state tree, the
    credentials, the origin) and the loop runs as it."""
    kit = make_kit(root / "kit", user=user)
    project = admin_project(admin, **(policy or {}))
    origin, clone = make_clone(root / "repo")
    # The loop reports its launches' cost rows after they end: a supervised credential.
    token = issue_token(admin, f"impl-{uuid.uuid4().hex[:6]}", project, "supervised")
    write_credentials(kit.state / "impl/coordinator", live.url, token)
    if user is not None:
        os.chmod(root, 0o755)  # noqa: S103 - the account must reach its kit
        for tree in (kit.state, origin):
            subprocess.run(["chown", "-R", f"{user}:{user}", str(tree)], check=True)
        top.setdefault("supervisor_program", [*PORTABLE_PYTHON, "-m", "agentc.supervisor.cli"])
    program = write_agent(root, agent)
    loop = LoopKit(
        kit,
        live,
        admin,
        project,
        origin,
        program,
        root / "supervisor.toml",
        agent_run(program),
        top=top,
        user=user,
        clone=clone,
    )
    loop.write_config()
    return loop


CLAUDE = HARNESS_BIN / "claude"


def make_claude_loop_kit(root: Path, live: LiveServer, admin: httpx.Client, **top: Any) -> LoopKit:
    """A loop kit with the submitting agent, whose ``claude`` is the real harness binary."""
    return make_loop_kit(
        root, live, admin, SUBMITTING_AGENT, harness_paths={"claude": str(CLAUDE)}, **top
    )
