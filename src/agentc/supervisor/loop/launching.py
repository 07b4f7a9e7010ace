"""What an implementer and a reviewer launch share: the lease the loop holds for it, its
launch record, the supervision while it runs and the end of a settled launch.

:class:`LeasedLaunch` is the base of :class:`~agentc.supervisor.loop.implementer.ImplementerLaunch`
and :class:`~agentc.supervisor.loop.review.ReviewLaunch`. Each runs in a worker of its own (a
fork of the loop, :mod:`.workers`), which tells the loop when it holds its claim. While the
launch's process runs, :meth:`LeasedLaunch._supervise_lease` renews the lease with a backoff
while the role's gate holds, and drains the process group when a gate fails, the lease is gone
or the loop stops (the loop itself beats the heartbeat). The record is written before the claim
and again with the attempt, the pid and the outcome, so a loop that dies mid-launch is settled
by the next poll.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from agentc.client.reads import Action, Claim, ClaimedAttempt
from agentc.core.errors import AgentcError, CoordinatorError
from agentc.core.model_policy import ModelPolicy
from agentc.core.roles import Role
from agentc.files.procs import start_ticks
from agentc.gateway.ledger import LaunchSpend
from agentc.supervisor.launch import agentsession, rundir
from agentc.supervisor.launch.request import CoordinatorAccess, LaunchRequest
from agentc.supervisor.launch.rundir import RunLayout
from agentc.supervisor.loop import admission, coordinator, costs, hostlaunch, launchlog, repo, steps
from agentc.supervisor.loop.gates import Backoff, progress_age_ms
from agentc.supervisor.loop.records import LaunchRecord, Records, boot_id, now_ms

if TYPE_CHECKING:
    from agentc.client.ops import Agent
    from agentc.supervisor.config import SupervisorConfig

C = TypeVar("C", bound=Claim)  # the claim answer of a launch's role


class Loop(Protocol):
    """What a launch needs of the loop running it (:class:`agentc.supervisor.loop.run.Loop`)."""

    config: SupervisorConfig
    state: Path
    records: Records
    binding: coordinator.Binding
    canary: coordinator.Binding | None
    mirror: Path
    stopping: bool

    def repository(self, project: str) -> tuple[str, str]: ...

    def claimed(self, launch_id: str) -> None: ...

    def release_failed(self, record: LaunchRecord, exc: AgentcError) -> str: ...

    def settle_launch(self, record: LaunchRecord, remove: Callable[[], None]) -> None: ...


def log(message: str) -> None:
    print(f"agentc-supervisor run: {message}", file=sys.stderr, flush=True)


def record_run(
    loop: Loop,
    client: Agent,
    record: LaunchRecord,
    attempt_id: str,
    state: str | None,
    *,
    exited: str,
    stopped: str | None = None,
    at_limit: bool = False,
    ended_ms: int | None = None,
) -> str:
    """Record what the agent did in the launch's attempt (its steps from the run's event
    stream, cost and tokens, duration, how it ended and why) with the loop's own credential,
    before the run's directory is removed; best effort, what happened in words. The one way
    for the loop that ran the launch and for the next loop settling one whose loop died."""
    cfg = loop.config
    role: Role = "reviewer" if record.role == "reviewer" else "implementer"
    run = RunLayout.of_launch(loop.state, role, record.launch_id).run
    harness = record.vendor.get("harness") or "unknown"
    summary = steps.summary_of(run, harness, record.vendor.get("model"), costs.price_table(cfg))
    ending = steps.ending_of(
        state,
        stopped=stopped,
        at_limit=at_limit,
        rate_limited=summary is not None and summary.rate_limited,
        exited=exited,
        gateway_stop=steps.gateway_stop(launchlog.terminal_record(run)),
    )
    body = steps.body_of(
        summary,
        harness,
        ending,
        started_ms=record.started_ms,
        ended_ms=ended_ms,
        max_bytes=cfg.run.steps_max_kib * 1024,
    )
    body.update(launch_id=record.launch_id, prompt_sha256=record.prompt_sha256)
    return steps.record(client, attempt_id, body)


@dataclass
class Lease:
    """The attempt as the loop last heard of it from the coordinator."""

    attempt_id: str
    generation: int
    renew_after: float
    view: dict[str, Any] = field(default_factory=dict)
    heard_at: float = field(default_factory=time.monotonic)  # monotonic time of the answer

    @classmethod
    def of_claim(cls, claim: Claim) -> Lease:
        """The lease a claim's answer grants (``renew_after_seconds`` 60 when it names none)."""
        attempt = claim["attempt"]
        renew = claim.get("renew_after_seconds") or 60
        return cls(attempt["id"], attempt["generation"], float(renew), dict(attempt))

    def progress_age_ms(self) -> int:
        age = progress_age_ms(self.view) or 0
        return age + int((time.monotonic() - self.heard_at) * 1000)


def drain(running: hostlaunch.Running, grace_seconds: float) -> None:
    """SIGTERM to the launch's process group, SIGKILL after ``grace_seconds``."""
    pgid = running.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_seconds
    while running.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if running.proc.poll() is None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def renew(
    client: Agent,
    lease: Lease,
    backoff: Backoff,
    now: float,
    *,
    gone: Callable[[str], str],
    label: str,
    step: str | None = None,
    spent_usd: float | None = None,
    spent_tokens: int | None = None,
) -> tuple[str | None, float]:
    """Renew ``lease``, telling its step and spend; returns why to stop (``gone(code)`` when
    the coordinator says the lease is over for good) and when to renew next (with ``backoff``
    after a failure)."""
    try:
        data = coordinator.renew(
            client, lease.attempt_id, lease.generation, step, spent_usd, spent_tokens
        )
    except CoordinatorError as exc:
        if exc.code in coordinator.FINAL_CODES:
            return gone(str(exc.code)), now
        delay = backoff.failure()
    except AgentcError as exc:
        delay = backoff.failure()
        log(f"renewing {label} failed: {coordinator.describe_error(exc)}")
        return None, now + delay
    else:
        backoff.success()
        lease.view = data.get("attempt", lease.view)
        lease.heard_at = time.monotonic()
        lease.renew_after = float(data.get("renew_after_seconds") or lease.renew_after)
        return None, now + lease.renew_after
    log(f"renewing {label} failed; next try in {delay:g} s")
    return None, now + delay


class LeasedLaunch:
    """A launch the loop holds a lease for, from its record to its settled end."""

    loop: Loop
    role: ClassVar[Role]  # each kind of launch names its one role
    failure: ClassVar[str]  # how the outcome of a launch of the role that failed begins

    def __init__(
        self,
        loop: Loop,
        action: Action,
        vendor: dict[str, str],
        binding: coordinator.Binding,
        mirror: Path,
    ) -> None:
        """``action`` is what ``next`` offered; ``binding`` and ``mirror`` are its project's (the
        canary project's, or the main one)."""
        self.loop, self.action, self.vendor = loop, action, vendor
        self.task = str(action["task_id"])
        self.binding, self.mirror = binding, mirror
        self.launch_id = str(uuid.uuid4())
        self.layout = RunLayout.of_launch(loop.state, self.role, self.launch_id)
        self.private = loop.records.sessions / self.launch_id
        self.record: LaunchRecord | None = None
        self.stopped: str | None = None  # why the loop stopped it, if it did
        self.at_limit = False  # whether that was the role's time limit
        self.policy = ModelPolicy()  # the task's model policy, read after the claim

    def run(self) -> str:
        """Claim, launch, supervise and settle; returns the outcome for the poll."""
        raise NotImplementedError

    def outcome(self) -> str:
        """:meth:`run` in the launch's worker; a failure it raised is the outcome too (a
        claimed attempt stays recorded: the next poll settles it)."""
        try:
            return self.run()
        except (AgentcError, OSError) as exc:
            return f"{self.failure}({self.task}: {coordinator.describe_error(exc)})"

    def _new_record(self) -> LaunchRecord:
        raise NotImplementedError

    def _claim(self, client: Agent) -> Claim:
        """The claim's answer: ``attempt`` and ``renew_after_seconds`` and the role's data."""
        raise NotImplementedError

    def _remove(self) -> None:
        """Remove what the launch left (clone, run, private coordinator state)."""
        raise NotImplementedError

    def _time_limit_seconds(self) -> float:
        """The longest the role's launch may run (the loop stops it then: a limit hit)."""
        raise NotImplementedError

    def _blank_record(
        self,
        project: str,
        task: str,
        vendor: dict[str, str],
        *,
        activity: str | None = None,
        submission: str | None = None,
    ) -> LaunchRecord:
        """A record of this launch by this loop process, before any claim."""
        return LaunchRecord(
            launch_id=self.launch_id,
            project=project,
            task=task,
            attempt=None,
            generation=0,
            boot_id=boot_id(),
            loop_pid=os.getpid(),
            loop_ticks=start_ticks(os.getpid()),
            recorded_ms=now_ms(),
            vendor=dict(vendor),
            role=self.role,
            activity=activity,
            submission=submission,
            canary=self._canary(),
        )

    def _write_record(self, attempt: str | None, generation: int) -> None:
        if self.record is None:
            self.record = self._new_record()
        self.record.attempt, self.record.generation = attempt, generation
        self.loop.records.write(self.record)

    def _claim_lease(
        self, client: Agent, refused: type[BaseException], claim_of: Callable[[Agent], C]
    ) -> tuple[C, Lease]:
        """Claim, with the record written before and after. A failure of type ``refused`` (one
        that held nothing for certain) removes the launch and its record; any other leaves the
        record for the next poll to settle."""
        self._write_record(None, 0)
        try:
            claim = claim_of(client)
        except refused:
            self._remove()
            self.loop.records.remove(self.launch_id)
            raise
        lease = Lease.of_claim(claim)
        self._write_record(lease.attempt_id, lease.generation)
        self.loop.claimed(self.launch_id)  # the loop may ask for more work now
        return claim, lease

    def _connect(self, client: Agent, name: str) -> None:
        """A new coordinator session named ``name`` and the harness, for the claim."""
        harness = self.vendor["harness"].split(":", 1)[0]
        client.connect(harness=f"{name}-{harness}", new=True)

    def _clone(self, revision: str, url: str) -> None:
        """The launch's clone of ``revision`` from the mirror, its origin ``url``."""
        run_cfg = self.loop.config.run
        repo.clone(
            self.mirror,
            revision,
            self.layout.clone,
            origin_url=url,
            name=run_cfg.git_name,
            email=run_cfg.git_email,
        )

    def _write_prompt(self, text: str) -> None:
        data = text.encode("utf-8")
        fd = rundir.create_new(self.layout.prompt)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if self.record is not None:  # what the launch seals, kept for its provenance
            self.record.prompt_sha256 = hashlib.sha256(data).hexdigest()
            self.loop.records.write(self.record)

    def _request(
        self, attempt: ClaimedAttempt, task: str, access: CoordinatorAccess | None
    ) -> LaunchRequest:
        """The launch's request, in the role's agent session (established now if need be)."""
        request = LaunchRequest(
            role=self.role,
            harness=self.vendor["harness"],
            run=self.layout.run,
            clone=self.layout.clone,
            launch_id=self.launch_id,
            model=self.vendor.get("model", "default"),
            attempt=str(attempt["id"]),
            generation=int(attempt["generation"]),
            task=task,
            project=self.binding.project_id,
            canary=self._canary(),
            model_policy=self.policy,
            coordinator=access,
        )
        session = agentsession.ensure(self.loop.config, self.role)
        return dataclasses.replace(request, agent_session=session)

    def _canary(self) -> bool:
        """Whether this launch serves the dedicated canary project (``[run.canary_binding]``)."""
        canary = self.loop.canary
        return canary is not None and self.binding.project_id == canary.project_id

    def _record_started(self, running: hostlaunch.Running) -> None:
        assert self.record is not None
        self.record.pid, self.record.start_ticks = running.pid, start_ticks(running.pid)
        self.record.started_ms = now_ms()
        self.loop.records.write(self.record)

    def _supervise_lease(
        self,
        client: Agent,
        lease: Lease,
        running: hostlaunch.Running,
        *,
        gate: Callable[[float], str | None],
        gone: Callable[[str], str],
        label: str,
        stop_note: str,
        limit_seconds: float = float("inf"),
    ) -> str | None:
        """Renew while ``running`` runs and ``gate(elapsed seconds)`` names no reason to stop;
        drain it when one does, the lease is gone or the loop stops, and return why."""
        cfg = self.loop.config.run
        started = time.monotonic()
        deadline = started + limit_seconds
        next_renew = started + lease.renew_after
        cap = min(300.0, lease.renew_after)
        backoff = Backoff(first=min(30.0, cap), cap=cap)
        tail = steps.Tail(self.layout.run, self.vendor["harness"])
        meter = LaunchSpend(admission.paths(self.loop.config)[1], self.launch_id)
        while running.proc.poll() is None:
            now = time.monotonic()
            reason = "the host supervisor stopped" if self.loop.stopping else None
            reason = reason or gate(now - started)
            if reason is None and now >= next_renew:
                reason, next_renew = renew(
                    client,
                    lease,
                    backoff,
                    now,
                    gone=gone,
                    label=label,
                    step=tail.current(),
                    spent_usd=meter.spent(),
                    spent_tokens=meter.tokens,
                )
            if reason is not None:
                log(f"{stop_note}: {reason}")
                self.stopped = reason
                self.at_limit = now - started >= min(limit_seconds, self._time_limit_seconds())
                drain(running, cfg.drain_seconds)
                return reason
            try:
                running.proc.wait(timeout=min(1.0, max(0.05, min(next_renew, deadline) - now)))
            except subprocess.TimeoutExpired:
                pass
        return None

    def _record_steps(self, client: Agent, attempt_id: str, state: str | None, exited: str) -> None:
        """Record what the agent did in the attempt, before the run's directory is removed."""
        assert self.record is not None
        said = record_run(
            self.loop,
            client,
            self.record,
            attempt_id,
            state,
            exited=exited,
            stopped=self.stopped,
            at_limit=self.at_limit,
        )
        log(f"task {self.task}: {said}")

    def gateway_stop(self) -> str | None:
        """What ended the launch's model calls at the gateway (its terminal record), if any."""
        return steps.gateway_stop(launchlog.terminal_record(self.layout.run))  # also record_run

    def _log_end(self, pushes: list[dict[str, Any]]) -> None:
        """Append the launch's pushes and end to its event log (before the run is removed)."""
        directory = self.loop.config.launch_logs
        problem = launchlog.append_end(directory, self.launch_id, self.layout.run, pushes,
                                       self.stopped)  # fmt: skip
        if problem is not None:
            log(f"launch {self.launch_id}: {problem}")

    def _record_launch_log(self, client: Agent, attempt_id: str, submission: str | None) -> None:
        """Record the summary of the launch's event log with the attempt (best effort)."""
        directory = self.loop.config.launch_logs
        if directory is None:
            return
        body = launchlog.summary_body(directory, self.launch_id, submission)
        log(f"task {self.task}: {launchlog.record(client, attempt_id, body)}")

    def _release_failed(self, exc: AgentcError, what: str) -> str:
        """Note a release that failed in the record, kept for the next poll to settle."""
        assert self.record is not None
        outcome = self.loop.release_failed(self.record, exc)
        log(f"{what}: {outcome}; kept for the next poll")
        return outcome

    def _finish(self, outcome: str) -> None:
        """Record the launch as settled with ``outcome``, remove what it left, finish it."""
        assert self.record is not None
        self.record.outcome = outcome
        self.loop.settle_launch(self.record, self._remove)
