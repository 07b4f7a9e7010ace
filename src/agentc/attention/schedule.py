"""The built-in scheduler ``agentc up`` runs, so one machine needs no timers: each job
(``check``, ``digest``, ``canary``) is started as an ``agentc-attention`` child process when its
interval (``[schedule]``) has passed since it last started, one at a time per job, its output
appended to ``logs/attention-<job>.log``. When each job last started is kept in
``<state_dir>/schedule.json``, so a restarted ``up`` does not run them again at once; a job's
first run comes one interval after the scheduler first saw it (the checks' after two minutes),
so a new installation's board is not given a canary task at its first start.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from agentc.attention.config import AttentionConfig
from agentc.files import UnsafeFile, read_private, write_atomic

FIRST_CHECK_SECONDS = 120.0
JOBS = ("check", "digest", "canary")


@dataclass
class Scheduler:
    program: list[str]  # how to run agentc-attention
    config_path: Path
    config: AttentionConfig
    harness: str  # the canary's
    logs: Path
    env: dict[str, str]
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def state_file(self) -> Path:
        return self.config.state_dir / "schedule.json"

    def interval(self, job: str) -> float:
        s = self.config.schedule
        return {"check": s.check_seconds, "digest": s.digest_seconds, "canary": s.canary_seconds}[
            job
        ]

    def _load(self) -> dict[str, float]:
        try:
            raw = read_private(self.state_file, max_bytes=65536)
            data = json.loads(raw)
            if not isinstance(data, dict):
                return {}
            return {k: float(v) for k, v in data.items() if k in JOBS}
        except (UnsafeFile, ValueError, TypeError):  # damaged: every job is due again
            return {}

    def _save(self, marks: dict[str, float]) -> None:
        self.config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(self.state_file, json.dumps(marks).encode() + b"\n", mode=0o600)

    def argv(self, job: str) -> list[str]:
        tail = ["canary", "--harness", self.harness] if job == "canary" else [job]
        return [*self.program, "--config", str(self.config_path), *tail]

    def start(self, job: str, now: float) -> None:
        log = self.logs / f"attention-{job}.log"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            self.running[job] = subprocess.Popen(
                self.argv(job), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=self.env
            )
        finally:
            os.close(fd)
        marks = self._load()
        marks[job] = now
        self._save(marks)

    def tick(self, now: float) -> list[str]:
        """Start every job that is due; the jobs started."""
        for job, proc in list(self.running.items()):
            if proc.poll() is not None:
                del self.running[job]
        marks = self._load()
        if not marks:  # first seen: each job's first run one interval from now
            first = min(FIRST_CHECK_SECONDS, self.interval("check"))
            marks = {"check": now - self.interval("check") + first}
            marks.update({job: now for job in ("digest", "canary")})
            self._save(marks)
        started = []
        for job in JOBS:
            last = marks.get(job, now)
            if job not in self.running and now - last >= self.interval(job):
                self.start(job, now)
                started.append(job)
        return started

    def stop(self, timeout: float = 10.0) -> None:
        for proc in self.running.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.running.values():
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.running.clear()
