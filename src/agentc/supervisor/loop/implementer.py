"""One implementer launch from the loop: claim, clone, worktree, prompt, start, renew, settle.

The launch is spawned from the loop's own process (:func:`hostlaunch.start`: the same plan,
argv, markers, sealed prompt and reaping as ``agentc-supervisor launch``; in host mode forked
as the implementer account, to which the run and clone are handed first), in a process group
of its own so a drain is one signal. Every step that can fail after the claim releases the
attempt with a handoff naming why, unless the agent already submitted it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentc.core.errors import AgentcError, CoordinatorError
from agentc.supervisor import agentsession, launch_root, rundir
from agentc.supervisor.contracts import implementer_prompt
from agentc.supervisor.launch_request import CoordinatorAccess, LaunchRequest
from agentc.supervisor.loop import coordinator, hostlaunch, push, repo
from agentc.supervisor.loop import setup as project_setup
from agentc.supervisor.loop.gates import Backoff, Progress, drain_reason, progress_age_ms
from agentc.supervisor.loop.push import PushHelper, token_digests
from agentc.supervisor.loop.records import LaunchRecord, Records, boot_id, now_ms, start_ticks
from agentc.supervisor.rundir import RunLayout

if TYPE_CHECKING:
    from agentc.client.ops import Agent
    from agentc.supervisor.config import SupervisorConfig


class Loop(Protocol):
    """What a launch needs of the loop running it (:class:`agentc.supervisor.loop.run.Loop`)."""

    config: SupervisorConfig
    state: Path
    records: Records
    binding: coordinator.Binding
    mirror: Path
    stopping: bool

    def repository(self, project: str) -> tuple[str, str]: ...

    def heartbeat(self, launch: dict[str, Any] | None = None) -> None: ...


BINDING_COPY = "coordinator-binding.toml"


def log(message: str) -> None:
    print(f"agentc-supervisor run: {message}", file=sys.stderr, flush=True)


@dataclass
class Lease:
    """The attempt as the loop last heard of it from the coordinator."""

    attempt_id: str
    generation: int
    view: dict[str, Any]
    renew_after: float
    heard_at: float  # monotonic time of the answer

    def progress_age_ms(self) -> int:
        age = progress_age_ms(self.view) or 0
        return age + int((time.monotonic() - self.heard_at) * 1000)


def layout_of(loop: Loop, launch_id: str) -> RunLayout:
    return RunLayout.of_launch(loop.state, "implementer", launch_id)


def remove_launch(loop: Loop, launch_id: str) -> None:
    """Remove the launch's clone, run and private coordinator state (never following links),
    and every push-helper directory no running launch holds."""
    base = push.base_dir(Path(os.path.realpath(loop.state)))
    if base.is_dir():
        push.sweep(base)
    layout = layout_of(loop, launch_id)
    rundir.remove_trees(layout.clone, layout.run, loop.records.sessions / launch_id)


def handoff(text: str) -> str:
    return (
        f"agentc-supervisor released the attempt: {text} Read the last checkpoint before resuming."
    )


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


class ImplementerLaunch:
    """One claimed task, from the claim to the settled end."""

    def __init__(
        self,
        loop: Loop,
        action: dict[str, Any],
        vendor: dict[str, str],
        binding: coordinator.Binding | None = None,
        mirror: Path | None = None,
    ) -> None:
        self.loop = loop
        # The project's binding and mirror (none: the main ones; else the canary project's).
        self.binding = binding or loop.binding
        self.mirror = mirror or loop.mirror
        self.action = action
        self.vendor = vendor
        self.launch_id = str(uuid.uuid4())
        self.layout = layout_of(loop, self.launch_id)
        self.private = loop.records.sessions / self.launch_id
        self.record: LaunchRecord | None = None
        self.push: PushHelper | None = None

    # -- claim and prepare -------------------------------------------------------------------

    def run(self) -> str:
        """Claim, launch, supervise and settle; returns the poll's outcome."""
        loop = self.loop
        project = self.binding.project_id
        url, branch = loop.repository(project)
        head = repo.update_mirror(self.mirror, url, branch)
        for path in (self.layout.run, self.layout.clone):
            path.mkdir(mode=0o700)
        with coordinator.session_client(self.binding, self.private, self.launch_id) as client:
            self._write_record(project, None, 0)
            try:
                claim = self._claim(client)
            except BaseException:
                remove_launch(loop, self.launch_id)
                loop.records.remove(self.launch_id)
                raise
            lease = Lease(
                str(claim["attempt"]["id"]),
                int(claim["attempt"]["generation"]),
                claim["attempt"],
                float(claim.get("renew_after_seconds") or 60),
                time.monotonic(),
            )
            self._write_record(project, lease.attempt_id, lease.generation)
            try:
                running = self._prepare_and_start(client, claim, head, url)
            except (AgentcError, OSError) as exc:
                self._stop_push()
                why = coordinator.describe_error(exc)
                log(f"task {self.action['task_id']}: the launch failed: {why}")
                text = handoff(f"the launch failed: {why}.")
                if isinstance(exc, project_setup.SetupFailed):
                    text = self._setup_handoff(exc)
                self._settle(client, lease, text)
                return f"Failed({self.action['task_id']}: {why})"
            try:
                exit_note = self._supervise(client, lease, running)
                outcome = hostlaunch.finish(running)
            finally:
                self._stop_push()
            code = outcome.exit_code if outcome.exit_code is not None else outcome.shell_status
            text = f"the launch exited with code {code}{exit_note}."
            self._settle(client, lease, handoff(text), empty_exit=code == 0)
            return f"Launched {{task: {self.action['task_id']!r}, exit_code: {code}}}"

    def _setup_handoff(self, exc: project_setup.SetupFailed) -> str:
        """The handoff of a failed setup: the failure and its output's tail, and where the
        whole log is kept (``unsubmitted/<launch>/setup.log``)."""
        kept = self.loop.records.keep_tails(
            self.launch_id, self.layout.run, names=(project_setup.SETUP_LOG,)
        )
        return handoff(f"the launch failed: {exc}\nThe setup's log is kept in {kept}.")

    def _write_record(self, project: str, attempt: str | None, generation: int) -> None:
        if self.record is None:
            self.record = LaunchRecord(
                launch_id=self.launch_id,
                project=project,
                task=str(self.action["task_id"]),
                attempt=None,
                generation=0,
                boot_id=boot_id(),
                loop_pid=os.getpid(),
                loop_ticks=start_ticks(os.getpid()),
                recorded_ms=now_ms(),
                vendor=dict(self.vendor),
            )
        self.record.attempt, self.record.generation = attempt, generation
        self.loop.records.write(self.record)

    def _claim(self, client: Agent) -> dict[str, Any]:
        harness = self.vendor["harness"].split(":", 1)[0]
        client.connect(harness=f"agentc-supervisor-{harness}", new=True)
        data = client.claim(str(self.action["task_id"]), int(self.action["task_revision"])).data
        claim: dict[str, Any] = data["claim"]
        claim["renew_after_seconds"] = data.get("renew_after_seconds")
        return claim

    def _prepare_and_start(
        self, client: Agent, claim: dict[str, Any], head: str, url: str
    ) -> hostlaunch.Running:
        loop, layout = self.loop, self.layout
        run_cfg = loop.config.run
        repo.clone(
            self.mirror,
            head,
            layout.clone,
            origin_url=url,
            name=run_cfg.git_name,
            email=run_cfg.git_email,
        )
        checkout = layout.clone / "agentc-checkout"
        client.prepare_worktree(str(layout.clone), str(checkout), head)
        session_id = client.state().session_id or self.launch_id
        attempt = claim["attempt"]
        text = implementer_prompt(
            project=self.binding.project_id,
            task=claim["task"],
            session=session_id,
            attempt=str(attempt["id"]),
            generation=int(attempt["generation"]),
            checkout=str(checkout),
            instructions=repo.instruction_files(self.mirror, head),
        )
        fd = rundir.create_new(layout.prompt)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        shutil.copyfile(self.binding.repo_config, layout.run / BINDING_COPY)
        rundir.prepare(layout)
        coordinator.hand_over(
            self.binding, self.private, layout.run / "state/coordinator", self.launch_id
        )
        group = None
        if loop.config.mode == "host":  # the run and clone are the implementer account's
            account = launch_root.role_account(loop.config, "implementer")
            hostlaunch.hand_over(account, layout.run, layout.clone)
            group = account.pw_gid
        return self._start(attempt, url, group)

    def _start(self, attempt: dict[str, Any], url: str, group: int | None) -> hostlaunch.Running:
        loop, layout = self.loop, self.layout
        self.push = PushHelper.prepare(
            loop.state, self.launch_id, group=group, account=push.helper_account(loop.config)
        )
        access = CoordinatorAccess(
            session=self.launch_id,
            repo_config=layout.run / BINDING_COPY,
            allow_insecure_loopback=self.binding.allow_insecure_loopback,
            push_socket=self.push.socket,
        )
        request = LaunchRequest(
            role="implementer",
            harness=self.vendor["harness"],
            run=layout.run,
            clone=layout.clone,
            launch_id=self.launch_id,
            model=self.vendor.get("model", "default"),
            attempt=str(attempt["id"]),
            generation=int(attempt["generation"]),
            task=str(self.action["task_id"]),
            project=self.binding.project_id,
            coordinator=access,
        )
        session = agentsession.ensure(loop.config, "implementer")
        request = dataclasses.replace(request, agent_session=session)
        beat = {"role": "implementer", "task": self.action["task_id"]}
        running = hostlaunch.start(
            loop.config,
            request,
            prepare=lambda plan: project_setup.run(
                loop.config,
                plan,
                self.binding.project_id,
                stopping=lambda: loop.stopping,
                beat=lambda: loop.heartbeat(launch=beat),
            ),
        )
        assert self.record is not None
        self.record.pid, self.record.start_ticks = running.pid, start_ticks(running.pid)
        loop.records.write(self.record)
        self.push.start(
            parent_pid=running.pid,
            task=str(self.action["task_id"]),
            launch=self.launch_id,
            remote=url,
            digests=token_digests(self.binding.credential_file),
            program=loop.config.push_helper.program,
            ssh_key=loop.config.push_helper.ssh_key,
            known_hosts=loop.config.push_helper.known_hosts,
        )
        return running

    def _stop_push(self) -> None:
        if self.push is not None:
            self.push.stop()
            for note in self.push.notes:
                log(f"launch {self.launch_id}: {note}")
            self.push = None

    # -- while it runs -----------------------------------------------------------------------

    def _events_age(self, started: float) -> float:
        try:
            mtime = os.stat(self.layout.run / "events.jsonl", follow_symlinks=False).st_mtime
        except OSError:
            mtime = 0.0
        return time.time() - max(mtime, started)

    def _supervise(self, client: Agent, lease: Lease, running: hostlaunch.Running) -> str:
        """Renew while the gates allow; drain when one fails. Returns a note for the handoff."""
        loop, cfg = self.loop, self.loop.config.run
        started_wall, started = time.time(), time.monotonic()
        next_renew = started + lease.renew_after
        next_beat = started
        cap = min(300.0, lease.renew_after)
        backoff = Backoff(first=min(30.0, cap), cap=cap)
        while running.proc.poll() is None:
            now = time.monotonic()
            if now >= next_beat:
                loop.heartbeat(launch={"role": "implementer", "task": self.action["task_id"]})
                next_beat = now + cfg.heartbeat_seconds
            reason = "the host supervisor stopped" if loop.stopping else None
            reason = reason or drain_reason(
                Progress(
                    alive=True,
                    events_age_seconds=self._events_age(started_wall),
                    progress_age_ms=lease.progress_age_ms(),
                    elapsed_seconds=now - started,
                ),
                budget_minutes=cfg.budget_minutes,
                events_stale_seconds=cfg.events_stale_seconds,
                checkpoint_stale_ms=int(cfg.checkpoint_stale_minutes * 60_000),
            )
            if reason is None and now >= next_renew:
                reason, next_renew = self._renew(client, lease, backoff, now)
            if reason is not None:
                log(f"stopped renewing attempt {lease.attempt_id}: {reason}")
                self._drain(running)
                return f" after a drain ({reason})"
            try:
                running.proc.wait(timeout=min(1.0, max(0.05, next_renew - now)))
            except subprocess.TimeoutExpired:
                pass
        return ""

    def _renew(
        self, client: Agent, lease: Lease, backoff: Backoff, now: float
    ) -> tuple[str | None, float]:
        try:
            data = coordinator.renew(client, lease.attempt_id, lease.generation)
        except CoordinatorError as exc:
            if exc.code in coordinator.FINAL_CODES:
                state = coordinator.task_attempt_state(client, lease.attempt_id)
                if state == "submitted":
                    return f"the agent submitted attempt {lease.attempt_id}", now
                return (
                    f"the attempt is no longer renewable ({exc.code}; state {state or 'unknown'})",
                    now,
                )
            delay = backoff.failure()
        except AgentcError as exc:
            delay = backoff.failure()
            log(f"renewing {lease.attempt_id} failed: {coordinator.describe_error(exc)}")
            return None, now + delay
        else:
            backoff.success()
            lease.view = data.get("attempt", lease.view)
            lease.heard_at = time.monotonic()
            lease.renew_after = float(data.get("renew_after_seconds") or lease.renew_after)
            return None, now + lease.renew_after
        log(f"renewing {lease.attempt_id} failed; next try in {delay:g} s")
        return None, now + delay

    def _drain(self, running: hostlaunch.Running) -> None:
        drain(running, self.loop.config.run.drain_seconds)

    # -- the end -----------------------------------------------------------------------------

    def _settle(self, client: Agent, lease: Lease, text: str, *, empty_exit: bool = False) -> None:
        """Release unless the agent submitted or released; then remove what the launch left.
        A harness that exited 0 with the attempt still active counts as an empty exit."""
        assert self.record is not None
        state = coordinator.task_attempt_state(client, lease.attempt_id)
        if state == "submitted":
            self.loop.records.count_empty_exit(None)
        elif state == "active" and empty_exit:
            self.loop.records.count_empty_exit(self.record.task)
        if state == "active" and (self.layout.run / ".state-started").exists():
            kept = self.loop.records.keep_tails(self.launch_id, self.layout.run)
            text += f" The launch's logs are kept in {kept}."
        try:
            if state == "active":
                self.record.outcome = coordinator.release(
                    client, lease.attempt_id, lease.generation, text
                )
            else:
                self.record.outcome = f"left as it is ({state or 'unknown'})"
        except AgentcError as exc:
            self.record.release_failures += 1
            self.record.outcome = f"release failed: {coordinator.describe_error(exc)}"
            self.loop.records.write(self.record)
            log(f"attempt {lease.attempt_id}: {self.record.outcome}; kept for the next poll")
            return
        self.record.released = True
        self.loop.records.write(self.record)
        remove_launch(self.loop, self.launch_id)
        self.loop.records.finish(self.record)
