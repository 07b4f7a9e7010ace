"""One review from the loop: ask, check, claim, fetch, clone, prompt, launch, judge, post.

Each poll, before the implementer's ``next``, the loop takes reviews (:func:`take`, each in a
worker of its own while a slot is free) when ``[run] reviewer`` is on and admission allows it
(the kill switch, free disk and memory, ``[health] reviewer_daily_usd`` from the gateway's
ledger with what running reviews may still spend, the reviewer's vendor). It asks
``next`` as the reviewer with the reviewer's own credential (``[run.reviewer_binding]``: another
principal than the implementer's, as the coordinator refuses a reviewer who contributed to the
task), checks the offered submission, opens a fresh coordinator session for the launch and
claims the review there. The candidate ref is fetched from the project's repository into the
mirror as ``refs/agentc-review/<launch>`` and must hold the submitted revision; the clone
``<state>/rev/clones/<launch>`` is made from it (hardened, :mod:`.repo`) and the prompt is the
reviewer contract with the criteria and the submission as quoted data.

The reviewer launch (role ``reviewer``) has no coordinator access: the loop renews the review's
lease while the reviewer runs, stops it after ``review_minutes``, reads its verdict (Claude: the
final result's structured output; ``command:``: its last non-empty stdout line), checks it
(:func:`agentc.core.verdict.check_verdict`) and posts it, or releases the review saying why.
In host mode the run and clone are handed to the reviewer account before the launch, which
runs as that account (:mod:`.hostlaunch`). Failed verdicts count per submission in
``<state>/loop/review-strikes.json``; after ``review_attempts`` in a row the submission is
skipped. The launch record (role ``reviewer``) is written before the claim, so a loop that dies
mid-review is settled by the next poll (:func:`release_dead`, :func:`remove_review`); clone,
run, private session and mirror branch are removed after every review. A verifying review
(``[verification.<project>]``) is signed in to its staging coordinator before the launch and
signed out when it ends (:mod:`.verification`); a failed sign-in releases the review.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentc.client import reads
from agentc.client.reads import ReviewClaim, Submission, Workflow
from agentc.core.errors import AgentcError, CoordinatorError, SupervisorError
from agentc.core.model import CANDIDATE_REF_PREFIX, Role
from agentc.core.rules import check_candidate_ref, check_revision_sha
from agentc.core.verdict import (
    Verdict,
    VerdictError,
    check_verdict,
    release_summary,
    review_body,
    verdict_from_text,
)
from agentc.files import read_tail
from agentc.supervisor.contracts import reviewer_prompt
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.events import summarize
from agentc.supervisor.launch import execute as launch_execute
from agentc.supervisor.launch import root as launch_root
from agentc.supervisor.launch import rundir
from agentc.supervisor.launch.rundir import RunLayout
from agentc.supervisor.loop import (
    admission,
    coordinator,
    hostlaunch,
    interdiff,
    repo,
    steps,
    verification,
)
from agentc.supervisor.loop.launching import Lease, LeasedLaunch, Loop, log, record_run
from agentc.supervisor.loop.records import LaunchRecord
from agentc.supervisor.loop.workers import Worker

if TYPE_CHECKING:
    from agentc.client.ops import Agent

MAX_OUTPUT = 64 << 20  # the most of a reviewer's output read for its verdict
LAST_LINE_BYTES = 1 << 20  # a command: reviewer's verdict line is within its last MiB


class Reviewing(Loop, Protocol):
    """What a review needs of the loop (:class:`agentc.supervisor.loop.run.Loop`)."""

    reviewer: coordinator.Binding | None
    started: set[str]  # the work this poll started (a task, a review activity): never twice

    def review_client(
        self, binding: coordinator.Binding | None = None
    ) -> AbstractContextManager[Agent]: ...

    def reviewer_of(self, project: str) -> coordinator.Binding: ...

    def review_mirror(self, project: str) -> Path: ...

    def repository(self, project: str, *, reviewer: bool = False) -> tuple[str, str]: ...

    def running(self, role: str) -> list[admission.Running]: ...

    def launch(self, launch: LeasedLaunch) -> Worker: ...


def layout_of(loop: Loop, launch_id: str) -> RunLayout:
    return RunLayout.of_launch(loop.state, "reviewer", launch_id)


def remove_review(loop: Reviewing, record: LaunchRecord) -> None:
    """Remove a review's clone, run, private coordinator state and mirror branch."""
    layout = layout_of(loop, record.launch_id)
    rundir.remove_trees(layout.clone, layout.run, loop.records.sessions / record.launch_id)
    repo.delete_review_branch(loop.review_mirror(record.project), record.launch_id)


def release_dead(loop: Reviewing, record: LaunchRecord, private: Path) -> str:
    """Release the review a dead launch left held, unless it was decided or released."""
    binding = loop.reviewer_of(record.project)
    with coordinator.session_client(binding, private, record.launch_id) as client:
        coordinator.resolve_pending(client)  # a lost claim or verdict answer is finished
        attempt, generation = record.attempt, record.generation
        held = client.state().review
        if attempt is None and held is not None:
            attempt, generation = str(held["attempt_id"]), int(held["generation"])
        if attempt is None or record.activity is None:
            return "nothing to release (no review was claimed)"
        state = coordinator.task_attempt_state(client, attempt)
        ended = steps.last_written(layout_of(loop, record.launch_id).run)
        said = record_run(
            loop, client, record, attempt, state, exited=steps.UNWATCHED, ended_ms=ended
        )
        log(f"task {record.task}: {said}")
        if state != "active":
            return f"left as it is ({state or 'unknown'})"
        return _release(client, record.activity, generation, release_summary(steps.UNWATCHED))


def _release(client: Agent, activity: str, generation: int, summary: str) -> str:
    """Release the review saying why (a summary refused for a secret: a note saying so)."""
    try:
        coordinator.resolve_pending(client)
        coordinator.without_secrets(
            lambda text: client.review_release(text, activity, generation),
            summary,
            "review's release summary",
        )
    except CoordinatorError as exc:
        if exc.code in coordinator.FINAL_CODES:
            return f"not released: the review lease is gone ({exc.code})"
        raise
    return "released"


def take(loop: Reviewing, binding: coordinator.Binding | None = None) -> str | Worker | None:
    """Ask for a review in ``binding``'s project (none: the reviewer's) and start it in a
    worker of its own (returned once it holds its claim or ended); else what the poll says
    (a refusal, a skipped submission, a failed ``next``), or None when there is none to take."""
    assert loop.reviewer is not None
    binding = binding or loop.reviewer
    vendor, problems = admission.admit(loop.config, "reviewer", loop.running("reviewer"))
    if vendor is None:
        return f"Review refused({'; '.join(problems)!r})"
    try:
        with loop.review_client(binding) as client:
            action = reads.offered(client, ("claim_review",), Role.REVIEWER)
    except AgentcError as exc:
        return f"Review failed({'next: ' + coordinator.describe_error(exc)!r})"
    if action is None or action.get("activity_id") in loop.started:  # given back: next poll's
        return None
    submission = str(action.get("submission_id"))
    strike = loop.records.review_strikes().get(submission)
    limit = loop.config.run.review_attempts
    if strike is not None and int(strike.get("failures", 0)) >= limit:
        return f"Skipped {{submission: {submission!r}, failures: {strike['failures']}}}"
    mirror = loop.review_mirror(binding.project_id)
    loop.started.add(str(action.get("activity_id")))
    return loop.launch(ReviewLaunch(loop, action, vendor, binding, mirror))


class ReviewLaunch(LeasedLaunch):
    """One offered review, from the check of its submission to its posted or released end."""

    loop: Reviewing

    role = "reviewer"
    failure = "Review failed"
    staging: verification.Staging | None = None  # a verifying review's session
    view: Workflow | None = None  # the task's workflow, read by the submission's check

    @property
    def activity(self) -> str:
        return str(self.action["activity_id"])

    @property
    def submission(self) -> str:
        return str(self.action["submission_id"])

    def failed(self, reason: str) -> str:
        """Count a failed review of this submission; skipped after ``review_attempts``."""
        count = self.loop.records.strike(self.submission, self.task, reason)
        limit = self.loop.config.run.review_attempts
        log(f"review of submission {self.submission} (task {self.task}) failed: {reason}")
        if count >= limit:
            log(
                f"submission {self.submission} (task {self.task}) is skipped: {count} reviews "
                f"in a row posted no verdict (review_attempts is {limit}); remove it from "
                f"{self.loop.records.strikes_path} to review it again"
            )
        return f"Review failed({self.task}: {reason})"

    # -- check and claim ---------------------------------------------------------------------

    def _submission(self) -> Submission:
        """The task's current submission, which must be the one offered, with a candidate."""
        with self.loop.review_client(self.binding) as client:
            self.view = reads.workflow(client, self.task)
        current = self.view["submission"]
        if current is None or current["id"] != self.submission:
            raise SupervisorError(f"submission {self.submission} is no longer the task's current")
        try:
            check_candidate_ref(current["candidate_ref"], CANDIDATE_REF_PREFIX)
            check_revision_sha("candidate_revision", current["candidate_revision"])
            check_revision_sha("base_revision", current["base_revision"])
        except AgentcError as exc:
            raise SupervisorError(f"the submission cannot be reviewed: {exc}") from None
        return current

    def run(self) -> str:
        loop = self.loop
        try:
            self._submission()
        except SupervisorError as exc:
            return self.failed(str(exc))
        url, branch = loop.repository(self.binding.project_id, reviewer=True)
        repo.update_mirror(self.mirror, url, branch)
        for path in (self.layout.runs, self.layout.clones):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for path in (self.layout.run, self.layout.clone):
            path.mkdir(mode=0o700)
        with coordinator.session_client(self.binding, self.private, self.launch_id) as client:
            # A refusal holds nothing for certain; any other failure may have lost the claim's
            # answer: the record stays, and the next poll resends the journaled claim and
            # releases what it got (release_dead).
            claim, lease = self._claim_lease(client, CoordinatorError, self._claim)
            try:
                return self._launch(client, lease, claim, url)
            finally:
                self._sign_out()

    def _launch(self, client: Agent, lease: Lease, claim: ReviewClaim, url: str) -> str:
        try:
            self.policy = coordinator.task_model_policy(client, self.task)
            running = self._prepare_and_start(claim, url)
        except (AgentcError, OSError) as exc:
            self._sign_out()
            return self._give_back(client, lease, f"the review could not start: "
                                   f"{coordinator.describe_error(exc)}")  # fmt: skip
        stopped = self._supervise(client, lease, running)
        outcome = hostlaunch.finish(running)
        self._sign_out()
        if stopped is not None:
            return self._give_back(client, lease, stopped, strike=not self.loop.stopping)
        return self._judge(client, lease, claim, outcome)

    def _sign_out(self) -> None:
        """A verifying review's staging session ends with its launch (once)."""
        staging, self.staging = self.staging, None
        if staging is not None:
            problem = verification.sign_out(staging)
            if problem is not None:
                log(f"review {self.activity} (task {self.task}): {problem}")

    def _new_record(self) -> LaunchRecord:
        return self._blank_record(
            self.binding.project_id,
            self.task,
            self.vendor,
            activity=self.activity,
            submission=self.submission,
        )

    def _remove(self) -> None:
        assert self.record is not None
        remove_review(self.loop, self.record)

    def _time_limit_seconds(self) -> float:
        return self.loop.config.run.review_minutes * 60

    def _claim(self, client: Agent) -> ReviewClaim:
        self._connect(client, "agentc-supervisor-reviewer")
        data = client.review_claim(self.activity, self.submission).data
        return reads.shaped(ReviewClaim, data, f"claim of review {self.activity}")

    # -- prepare and launch ------------------------------------------------------------------

    def _prepare_and_start(self, claim: ReviewClaim, url: str) -> hostlaunch.Running:
        loop, layout = self.loop, self.layout
        sub, task = claim["submission"], claim["task"]
        revision, base = str(sub["candidate_revision"]), str(sub["base_revision"])
        repo.fetch_candidate(self.mirror, str(sub["candidate_ref"]), self.launch_id, revision)
        self._clone(revision, url)
        text = reviewer_prompt(
            project=self.binding.project_id,
            title=task["title"],
            base=base,
            candidate=revision,
            criteria=task["acceptance_criteria"],
            submission=sub,
            instructions=repo.instruction_files(self.mirror, base),
            interdiff=self._interdiff(sub),
            launch_log=claim["launch_log"],
        )
        self._write_prompt(text)
        # A verifying review: the loop signs in to the staging coordinator now (or fails).
        self.staging = verification.sign_in(loop.config, self.binding.project_id, layout.run)
        if loop.config.mode == "host":  # the run and clone are the reviewer account's
            account = launch_root.role_account(loop.config, "reviewer")
            hostlaunch.hand_over(account, layout.run, layout.clone)
        # No coordinator access: the loop posts the verdict; the reviewer never reaches it.
        request = self._request(claim["attempt"], self.task, None)
        if self.staging is not None:
            request = dataclasses.replace(request, verification=self.staging.access())
        running = hostlaunch.start(loop.config, request)
        self._record_started(running)
        return running

    def _interdiff(self, sub: Submission) -> dict[str, Any] | None:
        """What the candidate changes against an approved one the integrator sent back (None:
        there is none; a failure to compute it is said in the prompt, not fatal)."""
        approved = self.view and interdiff.approved_before(self.view, str(sub["id"]))
        if not approved:
            return None
        name = f"{self.launch_id}-approved"
        try:
            return interdiff.compute(self.mirror, name, approved, sub)
        except (AgentcError, OSError) as exc:
            log(f"task {self.task}: no interdiff against the approved candidate: {exc}")
            return {
                "approved_candidate": approved.get("candidate_revision"),
                "unavailable": str(exc),
            }
        finally:
            repo.delete_review_branch(self.mirror, name)

    # -- while it runs -----------------------------------------------------------------------

    def _supervise(self, client: Agent, lease: Lease, running: hostlaunch.Running) -> str | None:
        """Renew the review's lease while the reviewer runs; stop it after ``review_minutes``,
        when the lease is gone or the loop stops. Returns why it was stopped, if it was."""
        minutes = self.loop.config.run.review_minutes

        def gate(elapsed: float) -> str | None:
            if elapsed >= minutes * 60:
                return f"the reviewer ran past {minutes:g} minutes and was stopped"
            return None

        return self._supervise_lease(
            client,
            lease,
            running,
            gate=gate,
            gone=lambda code: f"the review's lease is gone ({code})",
            label=f"review {lease.attempt_id}",
            stop_note=f"review {self.activity} (task {self.task})",
            limit_seconds=minutes * 60,
        )

    # -- the end -----------------------------------------------------------------------------

    def _verdict(self) -> Verdict:
        harness = self.vendor["harness"]
        if registry.is_command(harness):
            data = read_tail(self.layout.run / "events.jsonl", LAST_LINE_BYTES)
            lines = [x for x in data.decode("utf-8", "replace").splitlines() if x.strip()]
            return verdict_from_text(None, lines[-1] if lines else None)
        summary = summarize(harness, read_tail(self.layout.run / "events.jsonl", MAX_OUTPUT))
        return verdict_from_text(summary.structured_output, summary.final_text)

    def _judge(
        self,
        client: Agent,
        lease: Lease,
        claim: ReviewClaim,
        outcome: launch_execute.Outcome,
    ) -> str:
        """Check the reviewer's verdict and post it; else release the review saying why."""
        amendment = claim["submission"]["ac_amendment"]
        amended = list(amendment["new"]) if amendment else None
        criteria = claim["task"]["acceptance_criteria"]
        try:
            verdict = self._verdict()
        except (VerdictError, OSError) as exc:
            code = outcome.exit_code if outcome.exit_code is not None else outcome.shell_status
            why = f"the reviewer (exit code {code}) gave no valid verdict: {exc}"
            return self._give_back(client, lease, why, strike=True)
        problems = check_verdict(verdict, criteria, amended)
        if problems:
            why = "the verdict is invalid: " + "; ".join(problems)
            return self._give_back(client, lease, why, strike=True)
        body = review_body(verdict, submission_id=self.submission, has_amendment=bool(amended))
        try:
            client.review_decide(body, self.activity)
        except CoordinatorError as exc:
            why = f"the coordinator refused the verdict ({coordinator.describe_error(exc)})"
            if exc.code == coordinator.SECRET_REFUSED:
                found = exc.details
                why = (
                    f"the verdict's {found.get('field')} carries {found.get('kind')} "
                    f"({found.get('encoding')}), which the coordinator refuses"
                )
            return self._give_back(client, lease, why, strike=True)
        self.loop.records.clear_strike(self.submission)
        posted = f"its verdict ({verdict.decision}) was posted"
        self._log_end([])
        self._record_steps(client, lease.attempt_id, "submitted", posted)
        self._finish("decided: " + verdict.decision)
        return f"Reviewed {{task: {self.task!r}, decision: {verdict.decision!r}}}"

    def _give_back(self, client: Agent, lease: Lease, why: str, *, strike: bool = True) -> str:
        """Release the review with ``why`` (a strike unless the loop stops); then clean up.
        A release that fails keeps everything for the next poll to settle."""
        assert self.record is not None
        self._log_end([])
        self._record_steps(client, lease.attempt_id, None, why)
        try:
            done = _release(client, self.activity, lease.generation, release_summary(why))
        except AgentcError as exc:
            failed = self._release_failed(exc, f"review {self.activity}")
            return f"Review failed({self.task}: {why}; {failed})"
        self._finish(f"{done}: {why}")
        if strike:
            return self.failed(why)
        return f"Review released({self.task}: {why})"
