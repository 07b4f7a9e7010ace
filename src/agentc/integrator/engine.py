"""One poll of the integrator: recover, then land (or send back) each approved candidate.

For each queued integration activity: fetch the target and the candidate into the private
repository, refuse a candidate that does not descend from its base or whose base is not on the
target, build the landing from trees (:mod:`agentc.integrator.landing`: a commit of the
integrator's whose change is exactly the reviewed one), run the required checks on exactly that
commit in the sandbox, push the target only if it did not move (compare-and-swap), record the
landing. The journal (:mod:`agentc.integrator.journal`) is written before every step with
outside effects, and after a crash the remote decides: a result the target already contains is
recorded (never pushed again); one it does not contain was never landed and starts over; with
the journal lost, the landing is found by its ``Agentc-Activity`` trailer.
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO, TypeVar

from agentc.client.errors import TransportFailure
from agentc.core.errors import CoordinatorError
from agentc.core.model import CANDIDATE_REF_PREFIX
from agentc.core.rules import check_candidate_ref, check_revision_sha, rfc3339
from agentc.files import JsonLines
from agentc.integrator import batch
from agentc.integrator.checks import CheckResult, CheckRunner
from agentc.integrator.config import IntegratorConfig
from agentc.integrator.coordinator import Candidate, Coordinator
from agentc.integrator.journal import Entry, Journal, Step
from agentc.integrator.landing import Landing, build, seal
from agentc.integrator.message import Served
from agentc.integrator.repo import GitFailure, Repo
from agentc.integrator.scan import Finding, known_findings, scan_change
from agentc.integrator.sweep import Sweeper

T = TypeVar("T")

MAX_TRIES = 5  # integrations of one candidate per poll when the target keeps moving


class Outcome(StrEnum):
    """How one try at a candidate went."""

    LANDED = "landed"
    WAITING = "waiting"  # for the target to move, a person, or the next poll
    SENT_BACK = "sent_back"
    RETRY = "retry"  # the target moved under the push: build and check again now


class Integrator:
    def __init__(
        self,
        config: IntegratorConfig,
        coordinator: Coordinator,
        runner: CheckRunner,
        err: TextIO = sys.stderr,
    ) -> None:
        work = config.work_dir
        self.config = config
        self.coordinator = coordinator
        self.runner = runner
        self.repo = Repo(
            work / "repo",
            config.remote,
            config.target_branch,
            (config.committer_name, config.committer_email),
            config.ssh_key,
            config.signing_key,
        )
        self.journal = Journal(work / "journal")
        self.reports = JsonLines.open(work / "reports.jsonl")
        self.err = err
        self.red: tuple[str, list[CheckResult]] | None = None  # the last target checked
        self.red_told: str | None = None  # the last red target reported
        retention = config.candidate_retention_days
        self.sweeper = Sweeper(self.repo, coordinator, retention, self.write)
        self.swept_at: float | None = None  # time.monotonic() of the last sweep

    def close(self) -> None:
        self.reports.close()

    def report(self, event: str, entry: Entry | Candidate, **fields: Any) -> None:
        """A line of reports.jsonl about one candidate."""
        ids = {"activity_id": entry.activity_id, "submission_id": entry.submission_id}
        self.write(event, task_id=entry.task_id, **ids, **fields)

    def write(self, event: str, **fields: Any) -> None:
        """A line of reports.jsonl (and of standard error, without the checks)."""
        self.reports.write({"at": rfc3339(time.time_ns() // 1_000_000), "event": event, **fields})
        shown = {k: v for k, v in fields.items() if k not in ("checks", "task_id")}
        about = f" task {fields['task_id']}" if fields.get("task_id") else ""
        print(f"agentc-integrator: {event}{about}: {shown}", file=self.err)

    # -- one poll ------------------------------------------------------------------------------

    def poll(self) -> int:
        """Recover unfinished pushes, then handle every queued candidate; the landings made."""
        self.repo.ensure()
        landed = 0
        for entry in self.journal.entries():
            if entry.step == Step.PUSHING:
                landed += self._guarded(entry, functools.partial(self.resolve_push, entry))
        queue = self.coordinator.queue()
        if self.config.landing_batch > 1:
            landed += batch.land_queue(self, queue)
        else:
            landed += sum(self.land_one(candidate) for candidate in queue)
        self.sweep_refs()
        return landed

    def sweep_refs(self) -> None:
        """Remove the remote's WIP and expired candidate refs (:mod:`agentc.integrator.sweep`):
        at the first poll, then at most every ``ref_sweep_minutes``."""
        now = time.monotonic()
        if self.swept_at is not None and now - self.swept_at < self.config.ref_sweep_minutes * 60:
            return
        self.swept_at = now
        try:
            self.sweeper.sweep(time.time_ns() // 1_000_000)
        except (CoordinatorError, TransportFailure, GitFailure) as exc:
            self.write("error", task_id=None, reason=f"sweeping refs: {exc}")

    def land_one(self, candidate: Candidate) -> int:
        """Today's one-at-a-time path for one candidate; 1 when it landed."""
        return self._guarded(candidate, functools.partial(self.handle, candidate))

    def _guarded(self, item: Entry | Candidate, step: Callable[[], bool]) -> int:
        return 1 if self.guarded(item, step) else 0

    def guarded(self, item: Entry | Candidate, step: Callable[[], T]) -> T | None:
        """One candidate's failure (the coordinator refuses, git fails) never stops the poll."""
        try:
            return step()
        except (CoordinatorError, TransportFailure, GitFailure) as exc:
            self.report("error", item, reason=str(exc))
            return None

    def handle(self, cand: Candidate) -> bool:
        """Try to land one candidate; True when it landed (now, or before a crash)."""
        for _ in range(MAX_TRIES):
            entry = self.journal.load(cand.activity_id)
            if entry is not None and entry.submission_id != cand.submission_id:
                entry = None
            if entry is not None and entry.step in (Step.PUSHING, Step.RECORDED):
                if self.resolve_push(entry):
                    return True
                continue
            outcome = self.attempt(cand, entry)
            if outcome is not Outcome.RETRY:
                return outcome is Outcome.LANDED
        return False

    def attempt(self, cand: Candidate, entry: Entry | None) -> Outcome:
        tip = self.repo.fetch_target()
        if tip is None:
            self.report(
                "error", cand, reason=f"the remote has no branch {self.config.target_branch}"
            )
            return Outcome.WAITING
        if entry is not None and entry.target_before == tip:
            if entry.step in (Step.REJECTED, Step.TARGET_RED):
                return Outcome.WAITING  # nothing changed since the verdict
            result = entry.result_revision
            if entry.step == Step.CHECKED and result and self.repo.has_commit(result):
                return self.push(entry)  # checked on this very target: push, no second run
        entry = self.integrate(cand, tip)
        if entry.step == Step.PUSHING:  # landed before: record it, never push again
            return Outcome.LANDED if self.resolve_push(entry) else Outcome.WAITING
        if entry.step != Step.CHECKED:
            return Outcome.SENT_BACK if entry.step == Step.REJECTED else Outcome.WAITING
        return self.push(entry)

    def integrate(self, cand: Candidate, tip: str) -> Entry:
        """Build the landing on ``tip`` and check it; the journal entry says how it went."""
        base = self.first_entry(cand, tip)
        refused = self.unfit(cand, tip)
        if refused is not None:
            return self.send_back(base, refused[1], code=refused[0])
        trailers = {"Agentc-Activity": cand.activity_id, "Agentc-Submission": cand.submission_id}
        landed = self.repo.find_landing(cand.base_revision, tip, trailers)
        if landed is not None:  # landed before its journal was lost: check it, record it
            return self.already_landed(base, landed)
        if not cand.held:  # held for a person before and approved since: not scanned again
            findings = self.scan(cand)
            if findings:
                return self.found(base, findings)
        try:
            landing = self.build_on(cand, tip)
        except ValueError as exc:  # an id that cannot go into a message, a diff git garbled
            return self.send_back(base, f"cannot build the landing: {exc}")
        base = replace(base, reviewed_diff=landing.reviewed_diff)
        if landing.revision is None:
            return self.send_back(base, landing.reason, code=landing.code)
        checked = landing.revision
        checks = self.check(checked, Path("candidates") / cand.activity_id / checked)
        records = [c.record() for c in checks]
        if not all(c.passed for c in checks):
            entry = base.at(Step.REJECTED, result_revision=checked, checks=records)
            return self.failed(entry, checks)
        result = seal(self.repo, landing, records)  # the same tree, the checks in its trailers
        return self.journal.save(base.at(Step.CHECKED, result_revision=result, checks=records))

    @staticmethod
    def first_entry(cand: Candidate, tip: str) -> Entry:
        """The journal entry of a try at ``cand`` on ``tip`` before anything is decided."""
        ids = (cand.activity_id, cand.task_id, cand.submission_id, cand.candidate_revision)
        return Entry(*ids, tip, step=Step.REJECTED)

    def build_on(self, cand: Candidate, onto: str) -> Landing:
        """``cand``'s landing on ``onto`` (:func:`agentc.integrator.landing.build`), naming its
        provenance and the scan's verdict; ValueError when a value cannot go into a message."""
        scanned = "held for a person, then approved" if cand.held else "passed"
        served = Served.from_api(self.coordinator.provenance(cand.activity_id))
        return build(self.repo, self.config.merge_policy, cand, onto, served, scanned)

    def unfit(self, cand: Candidate, tip: str) -> tuple[str, str] | None:
        """Why the candidate cannot be landed at all (a reason code and the reason), or None:
        its ref, revisions and history are checked before anything is built from them."""
        try:  # the service checked these; the integrator trusts no input it passes to git
            check_candidate_ref(cand.candidate_ref, CANDIDATE_REF_PREFIX)
            check_revision_sha("candidate_revision", cand.candidate_revision)
            check_revision_sha("base_revision", cand.base_revision or None)
        except CoordinatorError as exc:
            return "candidate_invalid", exc.message
        fetched = self.repo.fetch_candidate(cand.candidate_ref, cand.submission_id)
        if fetched is None:
            return "candidate_missing", f"the remote has no {cand.candidate_ref}"
        if fetched != cand.candidate_revision:
            return "candidate_invalid", (
                f"{cand.candidate_ref} holds {fetched}, the submission names "
                f"{cand.candidate_revision}"
            )
        base = cand.base_revision
        if not self.repo.has_commit(base) or not self.repo.is_ancestor(base, tip):
            return "candidate_invalid", (
                f"the base revision {base} is not on the history of the target "
                f"{self.config.target_branch}"
            )
        if not self.repo.is_ancestor(base, fetched):
            return "candidate_invalid", (
                f"the candidate {fetched} does not descend from its base revision {base}: what "
                "was reviewed (the diff from the base) is not what its history holds"
            )
        return None

    def scan(self, cand: Candidate) -> list[Finding]:
        """The pre-landing scan of what the candidate adds (:mod:`agentc.integrator.scan`)."""
        out = scan_change(self.repo, cand.base_revision, cand.candidate_revision)
        known_findings(out, functools.partial(self.coordinator.known_secrets, cand.activity_id))
        return out.findings

    def found(self, entry: Entry, findings: list[Finding]) -> Entry:
        """The scan found something: sent back with the findings, or (``scan_findings =
        "hold"``) held for a person's review, which is not journaled: the activity leaves the
        queue and comes back only once a person approved it."""
        lines = [f.line() for f in findings]
        count = f"{len(lines)} finding{'s' if len(lines) > 1 else ''}"
        reason = f"the pre-landing scan found {count}: " + "; ".join(lines)
        reason = reason if len(reason) <= 4000 else reason[:3999] + "…"
        tail = "\n".join(lines) + "\n"
        if self.config.scan_findings == "send_back":
            return self.send_back(entry, reason, tail=tail, code="scan_finding")
        self.coordinator.hold(entry, reason, tail)
        self.report("held", entry, target=entry.target_before, reason=reason, tail=tail)
        return entry.at(Step.REJECTED, reason=reason)

    def failed(self, entry: Entry, checks: list[CheckResult]) -> Entry:
        """A check failed on the result: the target's fault if it fails there too."""
        tip = entry.target_before
        if entry.result_revision == tip:  # an empty change: its checks ran on the target
            self.red = (tip, checks)
        red = self.target_red(tip)
        if red:
            entry = entry.at(
                Step.TARGET_RED, reason=f"the target {tip} itself fails {red[-1].name}"
            )
            self.journal.save(entry)
            self.tell_red(entry, red)
            return entry
        last = checks[-1]
        reason = f"check {last.name} {last.outcome} (exit {last.exit_code})"
        return self.send_back(entry, reason, tail=last.tail, code="check_failed")

    def tell_red(self, entry: Entry, red: list[CheckResult]) -> None:
        """The target fails its own checks: reported once per target revision (a line of the
        reports, an event the attention digest shows); the candidates wait, not blamed, each
        tried again once the target moves."""
        tip = entry.target_before
        if self.red_told == tip:
            return
        records = [c.record() for c in red]
        self.coordinator.target_red(tip, records)
        self.red_told = tip
        self.report(
            "target_red",
            entry,
            target=tip,
            reason=entry.reason,
            tail=red[-1].tail,
            checks=records,
        )

    def already_landed(self, base: Entry, revision: str) -> Entry:
        """The target holds a landing of this activity (its journal was lost after the push):
        recorded once its checks pass on exactly that revision, never pushed again."""
        checks = self.check(revision, Path("candidates") / base.activity_id / revision)
        records = [c.record() for c in checks]
        if all(c.passed for c in checks):
            built_on = self.repo.rev(f"{revision}^1") or base.target_before
            entry = base.at(
                Step.PUSHING, result_revision=revision, checks=records, target_before=built_on
            )
            return self.journal.save(entry)
        reason = "the landing is already on the target and fails its checks there"
        entry = base.at(Step.TARGET_RED, result_revision=revision, checks=records, reason=reason)
        self.journal.save(entry)
        self.tell_red(entry, checks)
        return entry

    def check(self, revision: str, name: Path) -> list[CheckResult]:
        runs = self.config.work_dir / "runs" / name

        def fresh(tree: str) -> Path:
            self.repo.checkout_tree(revision, runs / tree)
            return runs / tree

        try:
            return self.runner.run_all(fresh, self.config.work_dir / "logs" / name)
        finally:
            shutil.rmtree(runs, ignore_errors=True)

    def target_red(self, tip: str) -> list[CheckResult] | None:
        """The target's own failing checks (run once per target revision), or None if green."""
        if self.red is None or self.red[0] != tip:
            self.red = (tip, self.check(tip, Path("targets") / tip))
        results = self.red[1]
        return None if all(c.passed for c in results) else results

    def send_back(
        self, entry: Entry, reason: str, tail: str = "", code: str = "candidate_invalid"
    ) -> Entry:
        """The candidate cannot land: the coordinator sends the task back to its implementer
        (the reason and the check log's tail on record), then the journal says so."""
        self.coordinator.send_back(entry, code, reason, tail)
        entry = self.journal.save(entry.at(Step.REJECTED, reason=reason))
        self.report(
            "sent_back",
            entry,
            target=entry.target_before,
            reason=reason,
            tail=tail,
            reviewed_diff=entry.reviewed_diff,
            checks=entry.checks,
        )
        return entry

    # -- push and record -----------------------------------------------------------------------

    def push(self, entry: Entry) -> Outcome:
        result = entry.result_revision
        assert result is not None
        entry = self.journal.save(entry.at(Step.PUSHING))
        refused = None
        if result != entry.target_before:  # an empty change lands nothing: no push
            refused = self.repo.push_if_unmoved(entry.target_before, result)
        if self.resolve_push(entry):
            return Outcome.LANDED
        if self.repo.remote_tip() == entry.target_before:
            # Not a move: the remote refused (its hooks, its permissions). The checked result
            # is pushed again at the next poll; the checks do not run again.
            self.report("error", entry, reason=f"the remote refused the push: {refused}")
            return Outcome.WAITING
        self.report("target_moved", entry, target=entry.target_before, reason=refused)
        return Outcome.RETRY

    def resolve_push(self, entry: Entry) -> bool:
        """After a push that may have happened, the remote decides: a target containing the
        result means it landed (record it, once); otherwise it never landed."""
        result = entry.result_revision
        assert result is not None
        tip = self.repo.fetch_target()
        if (
            tip is None
            or not self.repo.has_commit(result)
            or not self.repo.is_ancestor(result, tip)
        ):
            self.journal.save(entry.at(Step.CHECKED))
            return False
        # Idempotent: the same key replays, and a landing already recorded with this revision
        # is success (coordinator.record_landing).
        self.coordinator.record_landing(entry, result)
        entry = self.journal.save(entry.at(Step.RECORDED))
        self.report(
            "landed",
            entry,
            revision=result,
            target=tip,
            reviewed_diff=entry.reviewed_diff,
            checks=entry.checks,
        )
        return True
