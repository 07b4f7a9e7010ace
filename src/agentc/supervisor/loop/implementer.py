"""One implementer launch from the loop: claim, clone, worktree, prompt, start, renew, settle.

The launch is spawned from the loop's own process (:func:`hostlaunch.start`: the same plan,
argv, markers, sealed prompt and reaping as ``agentc-supervisor launch``; in host mode forked
as the implementer account, to which the run and clone are handed first), in a process group
of its own so a drain is one signal. Every step that can fail after the claim releases the
attempt with a handoff naming why, unless the agent already submitted it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentc.client import reads
from agentc.client.reads import Claim, ClaimedAttempt, TaskClaim
from agentc.core import secrets
from agentc.core.errors import AgentcError
from agentc.push import helper as push
from agentc.push.helper import PushHelper, token_digests
from agentc.supervisor.contracts import implementer_prompt
from agentc.supervisor.launch import root as launch_root
from agentc.supervisor.launch import rundir
from agentc.supervisor.launch.request import CoordinatorAccess
from agentc.supervisor.launch.rundir import RunLayout
from agentc.supervisor.loop import artifacts, coordinator, feedback, hostlaunch, repo
from agentc.supervisor.loop import setup as project_setup
from agentc.supervisor.loop.gates import Progress, drain_reason
from agentc.supervisor.loop.launching import Lease, LeasedLaunch, Loop, log, record_run
from agentc.supervisor.loop.records import LaunchRecord

if TYPE_CHECKING:
    from agentc.client.ops import Agent


BINDING_COPY = "coordinator-binding.toml"


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


def record_attempt(
    loop: Loop,
    client: Agent,
    record: LaunchRecord,
    mirror: Path,
    attempt_id: str,
    state: str | None,
    **ending: Any,
) -> None:
    """What an implementer's settled attempt leaves for the console: the patch of its code
    submission (when it submitted) and its run (``ending``: how it ended, for
    :func:`agentc.supervisor.loop.launching.record_run`); logged, never raising. The loop that
    ran the launch and the next loop settling a dead one's both record here."""
    if state == "submitted":
        kib = loop.config.run.patch_max_kib
        done = artifacts.record_patch(
            client, mirror, record.launch_id, record.task, attempt_id, kib
        )
        log(f"task {record.task}: {done}")
    log(f"task {record.task}: {record_run(loop, client, record, attempt_id, state, **ending)}")


class ImplementerLaunch(LeasedLaunch):
    """One claimed task, from the claim to the settled end."""

    role = "implementer"
    failure = "Failed"
    push: PushHelper | None = None
    pushes: tuple[dict[str, Any], ...] = ()  # what its push helper published or refused
    token_digest = ""  # the SHA-256 of the launch's attempt credential, once minted

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
            claim, lease = self._claim_lease(client, BaseException, self._claim)
            try:
                running = self._prepare_and_start(client, claim, head, url)
            except (AgentcError, OSError) as exc:
                self._stop_push()
                why = coordinator.describe_error(exc)
                log(f"task {self.task}: the launch failed: {why}")
                text = handoff(f"the launch failed: {why}.")
                if isinstance(exc, project_setup.SetupFailed):
                    text = self._setup_handoff(exc)
                self._settle(client, lease, text, exited=f"the launch failed: {why}")
                return f"Failed({self.task}: {why})"
            try:
                exit_note = self._supervise(client, lease, running)
                outcome = hostlaunch.finish(running)
            finally:
                self._stop_push()
            code = outcome.exit_code if outcome.exit_code is not None else outcome.shell_status
            stop = self.gateway_stop()
            if stop is not None:  # the next attempt learns why its calls were refused
                exit_note += f"; the model gateway ended its calls ({stop})"
            text = f"the launch exited with code {code}{exit_note}."
            exited = f"the launch exited with code {code}"
            self._settle(client, lease, handoff(text), exited=exited, empty_exit=code == 0)
            return f"Launched {{task: {self.task!r}, exit_code: {code}}}"

    def _setup_handoff(self, exc: project_setup.SetupFailed) -> str:
        """The handoff of a failed setup: the failure and its output's tail, and where the
        whole log is kept (``unsubmitted/<launch>/setup.log``)."""
        kept = self.loop.records.keep_tails(
            self.launch_id, self.layout.run, names=(project_setup.SETUP_LOG,)
        )
        return handoff(f"the launch failed: {exc}\nThe setup's log is kept in {kept}.")

    def _previous(self, told: dict[str, Any] | None, key: str) -> dict[str, str] | None:
        """The sent-back candidate the feedback names under ``key`` (``starts_from_candidate``:
        a fix-on-red attempt starts from it; ``redo_on_target``: a conflict's, to re-apply),
        fetched into the mirror so the launch's clone holds it (None: none, or it cannot be
        fetched, said in the log and in what the prompt tells)."""
        start = (told or {}).get(key)
        if not isinstance(start, dict):
            return None
        try:
            repo.fetch_candidate(
                self.mirror, start["candidate_ref"], self.launch_id, start["candidate_revision"]
            )
        except (AgentcError, OSError) as exc:
            log(f"task {self.task}: the sent-back candidate is not available: {exc}")
            assert told is not None
            told[key] = None
            told["candidate_unavailable_because"] = str(exc)
            return None
        return {k: str(v) for k, v in start.items()}

    def _new_record(self) -> LaunchRecord:
        return self._blank_record(self.binding.project_id, self.task, self.vendor)

    def _remove(self) -> None:
        remove_launch(self.loop, self.launch_id)

    def _time_limit_seconds(self) -> float:
        return self.loop.config.run.budget_minutes * 60

    def _claim(self, client: Agent) -> Claim:
        self._connect(client, "agentc-supervisor")
        data = client.claim(self.task, int(self.action["task_revision"])).data
        answer = reads.shaped(TaskClaim, data, f"claim of task {self.task}")
        claim = answer["claim"]
        claim["renew_after_seconds"] = answer["renew_after_seconds"]
        return claim

    def _prepare_and_start(
        self, client: Agent, claim: Claim, head: str, url: str
    ) -> hostlaunch.Running:
        loop, layout = self.loop, self.layout
        told = feedback.read(client, self.task)
        start = self._previous(told, "starts_from_candidate")
        redo = None if start else self._previous(told, "redo_on_target")
        self.policy = coordinator.task_model_policy(client, self.task)
        self._clone(head, url)  # (with a previous candidate fetched, its commits too)
        checkout = layout.clone / "agentc-checkout"
        base = start["base_revision"] if start else head
        client.prepare_worktree(str(layout.clone), str(checkout), base)
        if start:  # fix-on-red: the worktree is the candidate that failed, on its own base
            repo.start_from(checkout, start["candidate_revision"])
        if start or redo:
            repo.delete_review_branch(self.mirror, self.launch_id)
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
            feedback=told,
        )
        self._write_prompt(text)
        shutil.copyfile(self.binding.repo_config, layout.run / BINDING_COPY)
        rundir.prepare(layout)
        token = coordinator.mint_launch_credential(
            client, str(attempt["id"]), int(attempt["generation"])
        )
        self.token_digest = secrets.verifier(token)
        coordinator.hand_over(
            client, self.binding, layout.run / "state/coordinator", self.launch_id, token
        )
        group = None
        if loop.config.mode == "host":  # the run and clone are the implementer account's
            account = launch_root.role_account(loop.config, "implementer")
            hostlaunch.hand_over(account, layout.run, layout.clone)
            group = account.pw_gid
        return self._start(attempt, url, group)

    def _start(self, attempt: ClaimedAttempt, url: str, group: int | None) -> hostlaunch.Running:
        loop, layout = self.loop, self.layout
        self.push = PushHelper.prepare(
            loop.state, self.launch_id, group=group, account=launch_root.push_account(loop.config)
        )
        access = CoordinatorAccess(
            session=self.launch_id,
            repo_config=layout.run / BINDING_COPY,
            allow_insecure_loopback=self.binding.allow_insecure_loopback,
            push_socket=self.push.socket,
        )
        request = self._request(attempt, self.task, access)
        preparation = hostlaunch.Preparation(
            self.binding.project_id, stopping=lambda: loop.stopping
        )
        running = hostlaunch.start(loop.config, request, preparation)
        self._record_started(running)
        self.push.start(
            parent_pid=running.pid,
            task=self.task,
            launch=self.launch_id,
            remote=url,
            digests=[*token_digests(self.binding.credential_file), self.token_digest],
            program=loop.config.push_helper.program,
            ssh_key=loop.config.push_helper.ssh_key,
            known_hosts=loop.config.push_helper.known_hosts,
            wip_quota=(loop.config.push_helper.wip_max_refs, loop.config.push_helper.wip_max_mib),
        )
        return running

    def _stop_push(self) -> None:
        if self.push is not None:
            self.push.stop()
            self.pushes = tuple(self.push.events)
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
        cfg = self.loop.config.run
        started_wall = time.time()

        def gate(elapsed: float) -> str | None:
            return drain_reason(
                Progress(
                    events_age_seconds=self._events_age(started_wall),
                    progress_age_ms=lease.progress_age_ms(),
                    elapsed_seconds=elapsed,
                ),
                budget_minutes=cfg.budget_minutes,
                events_stale_seconds=cfg.events_stale_seconds,
                checkpoint_stale_ms=int(cfg.checkpoint_stale_minutes * 60_000),
            )

        def gone(code: str) -> str:
            state = coordinator.task_attempt_state(client, lease.attempt_id)
            if state == "submitted":
                return f"the agent submitted attempt {lease.attempt_id}"
            return f"the attempt is no longer renewable ({code}; state {state or 'unknown'})"

        reason = self._supervise_lease(
            client,
            lease,
            running,
            gate=gate,
            gone=gone,
            label=lease.attempt_id,
            stop_note=f"stopped renewing attempt {lease.attempt_id}",
        )
        return "" if reason is None else f" after a drain ({reason})"

    # -- the end -----------------------------------------------------------------------------

    def _submission_id(self, client: Agent, lease: Lease) -> str | None:
        try:
            sub = artifacts.submission_of(client, self.task, lease.attempt_id)
        except AgentcError:
            return None
        return str(sub["id"]) if sub is not None else None

    def _settle(
        self, client: Agent, lease: Lease, text: str, *, exited: str, empty_exit: bool = False
    ) -> None:
        """Record the run's steps; release unless the agent submitted or released; then remove
        what the launch left. A harness that exited 0 with the attempt still active counts as an
        empty exit. ``exited`` says how the launch's process ended."""
        assert self.record is not None
        try:  # first of all, the launch's credential dies with the launch
            coordinator.revoke_launch_credentials(client, lease.attempt_id, lease.generation)
        except AgentcError as exc:
            self._release_failed(exc, f"attempt {lease.attempt_id}")
            return
        state = coordinator.task_attempt_state(client, lease.attempt_id)
        self._log_end(list(self.pushes))
        submission = None
        if state == "submitted":
            self.loop.records.count_empty_exit(None)
            submission = self._submission_id(client, lease)
        elif state == "active" and empty_exit:
            self.loop.records.count_empty_exit(self.record.task)
        record_attempt(
            self.loop,
            client,
            self.record,
            self.mirror,
            lease.attempt_id,
            state,
            exited=exited,
            stopped=self.stopped,
            at_limit=self.at_limit,
        )
        self._record_launch_log(client, lease.attempt_id, submission)
        if state == "active" and (self.layout.run / ".state-started").exists():
            kept = self.loop.records.keep_tails(self.launch_id, self.layout.run)
            text += f" The launch's logs are kept in {kept}."
        try:
            if state == "active":
                outcome = coordinator.release(client, lease.attempt_id, lease.generation, text)
            else:
                outcome = f"left as it is ({state or 'unknown'})"
        except AgentcError as exc:
            self._release_failed(exc, f"attempt {lease.attempt_id}")
            return
        self._finish(outcome)
