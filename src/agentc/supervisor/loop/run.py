"""``agentc-supervisor run``: the live loop (docs/supervisor.md).

Each poll settles what an earlier poll or loop left (:meth:`Loop.settle`), takes at most one
review when ``[run] reviewer`` is on (:func:`agentc.supervisor.loop.review.take`), then checks
the implementer's admission, asks ``next``, and runs at most one implementer launch to its end
(:class:`~agentc.supervisor.loop.implementer.ImplementerLaunch`); the heartbeat is rewritten
after every poll and every ``heartbeat_seconds`` during a launch. SIGTERM or SIGINT stop new
claims, drain a running launch, release its attempt (or review) with a handoff, and end the
loop.

Personal mode runs as one unprivileged user and launches as that user. Host mode runs as root
(:func:`.checks.unsupported` refuses it otherwise) and launches each implementer and reviewer as its
role account (:mod:`.hostlaunch`), after :func:`.checks.host_checks` found the accounts, the state
layout and the loop's credentials fit.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentc.core.errors import AgentcError, ConfigError
from agentc.core.roles import Role, role_slug
from agentc.files import UnsafeFile
from agentc.sandbox import limits, reaper
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import preflight_host
from agentc.supervisor.launch.rundir import RunLayout
from agentc.supervisor.loop import admission, coordinator, costs, review, signin
from agentc.supervisor.loop.checks import (
    check_binding,
    check_canary_binding,
    check_reviewer_binding,
)
from agentc.supervisor.loop.costs import Summary
from agentc.supervisor.loop.implementer import ImplementerLaunch, handoff, remove_launch
from agentc.supervisor.loop.launching import log
from agentc.supervisor.loop.records import (
    HARNESS_LEDGER,
    MAX_RELEASE_TRIES,
    LaunchRecord,
    Records,
    boot_id,
    may_be_alive,
    now_ms,
    start_ticks,
)

LOOP_SESSION = "loop"
REVIEW_SESSION = "reviewer"
COSTS_RETRY_MS = 10 * 60 * 1000


class Loop:
    def __init__(self, config: SupervisorConfig) -> None:
        self.config = config
        self.binding = check_binding(config)  # before anything is written
        self.canary = check_canary_binding(config, self.binding)
        checked = check_reviewer_binding(config, self.binding)
        self.reviewer: coordinator.Binding | None = checked[0] if checked else None
        self.reviewer_url: str | None = checked[1] if checked else None
        # Reviews in the canary project: the reviewer's credential, the canary's project.
        self.canary_reviewer: coordinator.Binding | None = None
        reviewer, canary_binding = self.reviewer, self.canary
        if reviewer and canary_binding and reviewer.project_id != canary_binding.project_id:
            self.canary_reviewer = dataclasses.replace(
                canary_binding,
                repo_config=canary_binding.repo_config.with_name("reviewer-binding-canary.toml"),
                credential_file=reviewer.credential_file,
            )
        self.state = config.resolved_state_dir()
        self.records = Records(self.state)
        self.mirror = self.state / "mirror.git"
        canary = config.run.canary_binding
        self.canary_mirror = (canary.mirror if canary else None) or self.state / "mirror-canary.git"
        self.stopping = False
        self.iteration = 0
        self.outcome = "Idle"
        self.given_up: set[str] = set()
        self.costs_retry_at = 0
        self.expiry_warned_at = float("-inf")
        # The last admission's holds and unusable vendors, in the heartbeat (docs/attention.md).
        self.admission = admission.Admission(None, {}, [])

    def vendors_in_use(self) -> list[tuple[str, Role]]:
        """(harness, role) of every vendor this loop may launch: the implementer's primary and
        fallback, and the reviewer's when reviews are on."""
        roles: list[Role] = (
            ["implementer", "reviewer"] if self.config.run.reviewer else ["implementer"]
        )
        return [(c["harness"], r) for r in roles for c in admission.choices(self.config, r)]

    def warn_expiring(self, now: float | None = None) -> None:
        """At the first poll and then once a day: a warning for each credential in use that
        expires within ``[health] expiry_warn_days``."""
        now = time.time() if now is None else now
        if now - self.expiry_warned_at < signin.DAY:
            return
        self.expiry_warned_at = now
        for line in signin.expiry_warnings(self.config, self.vendors_in_use(), now):
            log(f"warning: {line}")

    def start(self) -> None:
        if self.config.mode == "personal":  # the user's own tree: made on first use
            for sub in ("", "impl", "impl/runs", "impl/clones", "rev", "rev/runs", "rev/clones"):
                (self.state / sub).mkdir(mode=0o700, parents=not sub, exist_ok=True)
        self.records.ensure()
        used = {harness for harness, _role in self.vendors_in_use()}
        pinned = preflight_host.pinned_problems(self.config, used)
        if pinned:
            raise ConfigError("pinned: " + "; ".join(pinned))
        bound = self.config.run.binding
        assert bound is not None
        coordinator.install_binding(
            self.binding.repo_config, bound.service_url, bound.project_id, bound.project_name
        )
        canary = self.config.run.canary_binding
        if self.canary is not None and canary is not None:
            coordinator.install_binding(
                self.canary.repo_config, canary.service_url, canary.project_id, canary.project_name
            )
        if self.reviewer is not None and self.reviewer_url is not None:
            rev = self.reviewer
            coordinator.install_binding(
                rev.repo_config, self.reviewer_url, rev.project_id, rev.project_name
            )
        if self.canary_reviewer is not None and canary is not None:
            rev = self.canary_reviewer
            coordinator.install_binding(
                rev.repo_config, canary.service_url, rev.project_id, rev.project_name
            )

    # -- the loop ----------------------------------------------------------------------------

    def run(self, once: bool) -> int:
        def stop(_signum: int, _frame: object) -> None:
            self.stopping = True

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop)
        self.start()
        while True:
            self.iteration += 1
            try:
                self.outcome = self.poll()
            except (AgentcError, OSError) as exc:  # a claimed attempt stays recorded: settled
                self.outcome = f"Failed({coordinator.describe_error(exc)!r})"
            log(f"poll {self.iteration}: {self.outcome}")
            self.heartbeat()
            self.report_costs()
            self.reap_strays()
            if once or self.stopping:
                return 0
            deadline = time.monotonic() + self.config.run.poll_seconds
            while not self.stopping and time.monotonic() < deadline:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def reap_strays(self) -> None:
        """Kill and reap what ended launches left orphaned to the loop (their subreaper), so
        no zombie piles up in a long-running loop; between polls the loop has no child of its
        own."""
        line = reaper.reap_strays(keep=()).line()
        if line is not None:
            log(line.removeprefix("agentc-supervisor: "))

    def report_costs(self, *, now: int | None = None, force: bool = False) -> Summary | None:
        """One reporting pass (after every poll; ten minutes after a failed one)."""
        now = now_ms() if now is None else now
        if not force and now < self.costs_retry_at:
            return None
        _kill, ledger, _vendors = admission.paths(self.config)
        running = {r.launch_id for r in self.records.all()}
        rows = costs.launch_rows(ledger, running, self.binding.project_id)
        harness_ledger = self.records.root / HARNESS_LEDGER
        rows += costs.launch_rows(harness_ledger, running, self.binding.project_id)
        reporter = costs.Reporter(self.records.root)
        # Each row goes with a credential of the attempt's own agent (the coordinator refuses
        # any other): a reviewer launch's with the reviewer's, the others with their project's.
        groups: dict[tuple[bool, str], list[dict[str, Any]]] = {}
        for row in rows:
            reviewing = row.get("role") == role_slug("reviewer") and self.reviewer is not None
            groups.setdefault((reviewing, row["project"]), []).append(row)
        summary = Summary()
        for (reviewing, project), items in groups.items():
            try:
                with self._cost_client(reviewing, project) as client:
                    summary = summary.plus(reporter.report(client, items, now))
            except UnsafeFile as exc:
                summary = summary.plus(Summary(pending=len(items), error=str(exc)))
        if summary.error is not None:
            self.costs_retry_at = now + COSTS_RETRY_MS
            log(f"report costs: {summary.error}")
        else:
            self.costs_retry_at = 0
        return summary

    def _cost_client(self, reviewing: bool, project: str) -> Any:
        """The client reporting a project's rows: the reviewer's or the implementer's, of the
        binding serving the project (else the main one)."""
        try:
            if reviewing:
                return self.review_client(self.reviewer_of(project))
            return self.client(self.binding_of(project))
        except ConfigError:
            return self.review_client() if reviewing else self.client()

    def heartbeat(self, launch: dict[str, Any] | None = None) -> None:
        data: dict[str, Any] = {
            "iteration": self.iteration,
            "outcome": self.outcome,
            "holds": self.admission.holds,
            "vendors": self.admission.unusable,
        }
        if launch is not None:
            data["launch"] = launch
        self.records.write_heartbeat(data)

    def poll(self) -> str:
        self.warn_expiring()
        refused = self.settle()
        if refused is not None:
            return refused
        if self.stopping:
            return 'Refused("the loop is stopping; no new claims")'
        outcomes = []
        for binding in self.reviewers():  # at most one review per project
            reviewed = review.take(self, binding)
            if reviewed is not None:
                outcomes.append(reviewed)
            if self.stopped():  # a signal during the review
                return "; ".join(outcomes) or 'Refused("the loop is stopping; no new claims")'
        implemented = self.implement()
        return "; ".join([*outcomes, implemented])

    def reviewers(self) -> list[coordinator.Binding]:
        """The reviewer's bindings, in the order reviews are taken: the canary project's
        first, then the reviewer's project (none without ``[run] reviewer``)."""
        if self.reviewer is None:
            return []
        canary = [self.canary_reviewer] if self.canary_reviewer is not None else []
        return [*canary, self.reviewer]

    def reviewer_of(self, project: str) -> coordinator.Binding:
        """The reviewer binding serving ``project`` (a review record's)."""
        for binding in self.reviewers():
            if binding.project_id == project:
                return binding
        raise ConfigError(
            f"run.reviewer_binding: a review of project {project} was left, which no reviewer "
            "binding names; restore its binding to settle it"
        )

    def stopped(self) -> bool:
        return self.stopping

    def implement(self) -> str:
        """The implementer's part of a poll: admission, ``next``, at most one launch."""
        self.admission = admission.measure(self.config)
        vendor, problems = self.admission.choice, list(self.admission.holds.values())
        if vendor is None:
            return f"Refused({'; '.join(problems)!r})"
        failed: list[str] = []
        holds: list[str] = []
        # The canary project first: its ready task is claimed ahead of the main project's work.
        for binding, mirror in self.bindings():
            where = "" if binding is self.binding else f" (canary project {binding.project_id})"
            try:
                with self.client(binding) as client:
                    offer = client.next()
            except (AgentcError, UnsafeFile) as exc:  # the other project is still asked
                failed.append(f"next{where}: {coordinator.describe_error(exc)}")
                log(f"{failed[-1]} (the other projects are still asked)")
                continue
            action = offer.get("action") if isinstance(offer, dict) else None
            kinds = ("claim_task", "recover_task")
            if not isinstance(action, dict) or action.get("kind") not in kinds:
                continue
            held = self.held(str(action.get("task_id")))
            if held is not None:
                holds.append(held)
                continue
            try:
                return ImplementerLaunch(self, action, vendor, binding, mirror).run()
            except AgentcError as exc:
                return f"Failed({action.get('task_id')}: {coordinator.describe_error(exc)})"
        if holds:
            return f"Refused({'; '.join(holds)!r})"
        if failed:
            return f"Failed({'; '.join(failed)!r})"
        return "Idle"

    def bindings(self) -> list[tuple[coordinator.Binding, Path]]:
        """The projects the implementer serves, in the order ``next`` asks them: the canary
        project (``[run.canary_binding]``) first, the main project last; with their mirrors."""
        main = [(self.binding, self.mirror)]
        return [(self.canary, self.canary_mirror), *main] if self.canary is not None else main

    def binding_of(self, project: str) -> coordinator.Binding:
        """The binding serving ``project`` (a launch record's); refused when none does."""
        for binding, _mirror in self.bindings():
            if binding.project_id == project:
                return binding
        raise ConfigError(
            f"run.canary_binding: a launch of project {project} was left, which neither "
            "[run.binding] nor [run.canary_binding] names; restore its binding to settle it"
        )

    def held(self, task: str) -> str | None:
        """Why the empty-exit limits hold this task or the whole host, if they do."""
        counts = self.records.empty_exits()
        path = self.records.root / "unsubmitted.json"
        total_limit, task_limit = (
            self.config.run.empty_exit_total_limit,
            self.config.run.empty_exit_limit,
        )
        if counts.get("damaged"):
            return f"{path} cannot be read: the host is held until the operator removes it"
        if total_limit and int(counts.get("total", 0)) >= total_limit:
            return (
                f"{counts['total']} launches in a row exited without a submission: the host is "
                f"held until the operator fixes the cause and removes {path}"
            )
        if task_limit and int(counts.get("tasks", {}).get(task, 0)) >= task_limit:
            return (
                f"task {task} is held: {task_limit} launches exited without a submission ({path})"
            )
        return None

    def client(self, binding: coordinator.Binding | None = None) -> Any:
        """The loop's own client (``next``, reads) for ``binding`` (none: the main one)."""
        if binding is None or binding is self.binding:
            return coordinator.session_client(
                self.binding, self.records.root / "client", LOOP_SESSION
            )
        return coordinator.session_client(
            binding, self.records.root / "client-canary", LOOP_SESSION
        )

    def review_client(self, binding: coordinator.Binding | None = None) -> Any:
        """The reviewer's client without a session (``next``, reads) for ``binding`` (none:
        the reviewer's project); a review claims in a fresh session of its own."""
        assert self.reviewer is not None
        if binding is None or binding is self.reviewer:
            return coordinator.session_client(
                self.reviewer, self.records.root / "client-rev", REVIEW_SESSION
            )
        root = self.records.root / "client-rev-canary"
        return coordinator.session_client(binding, root, REVIEW_SESSION)

    def review_mirror(self, project: str) -> Path:
        """The mirror a review fetches into: the loop's, or the reviewer project's own."""
        if project == self.binding.project_id:
            return self.mirror
        if self.canary is not None and project == self.canary.project_id:
            return self.canary_mirror
        return self.state / "mirrors" / f"{project}.git"

    def repository(self, project: str, *, reviewer: bool = False) -> tuple[str, str]:
        """The project's repository URL and branch: ``[setup.<project>]``, else the project's
        ``repository_url`` on the coordinator and ``[run] branch``."""
        setup = self.config.setup.get(project)
        branch = (setup.branch if setup else None) or self.config.run.branch
        if setup is not None and setup.repository_url:
            return setup.repository_url, branch
        which = self.review_client(self.reviewer_of(project)) if reviewer else None
        with which or self.client(self.binding_of(project)) as client:
            view = client.get(client.project())
        url = view.get("repository_url") if isinstance(view, dict) else None
        if not isinstance(url, str) or not url:
            raise ConfigError(f"setup.{project}.repository_url: the project names no repository")
        return url, branch

    # -- recovery ----------------------------------------------------------------------------

    def settle(self) -> str | None:
        """Settle every record a launch left; a refusal while one may still run."""
        boot, now = boot_id(), now_ms()
        me = (os.getpid(), start_ticks(os.getpid()))
        alive = []
        for record in self.records.all():
            if record.launch_id in self.given_up:
                continue
            ours = (record.loop_pid, record.loop_ticks) == me
            if not ours and may_be_alive(record, boot=boot, now=now):
                alive.append(record.launch_id)
                continue
            self._settle_dead(record)
        if alive:
            return f"Refused({'an earlier launch may still run (' + ', '.join(alive) + ')'!r})"
        return None

    def _settle_dead(self, record: LaunchRecord) -> None:
        private: Path = self.records.sessions / record.launch_id
        reviewing = record.role == "reviewer"
        # First, anything of the launch that still runs (one started in the instant before its
        # supervisor died has no pid on record) ends with its cgroups.
        limits.remove_left(
            self.config.limits, f"agentc-{record.launch_id}", f"agentc-setup-{record.launch_id}"
        )
        try:
            if reviewing and self.reviewer is None:
                raise ConfigError("a review was left held: set [run] reviewer = true to settle it")
            if not record.released and private.exists():
                if reviewing:
                    record.outcome = review.release_dead(self, record, private)
                else:
                    record.outcome = self._release_dead(record, private)
        except AgentcError as exc:
            self.release_failed(record, exc)
            if record.release_failures >= MAX_RELEASE_TRIES:
                self.given_up.add(record.launch_id)
                log(f"error: launch {record.launch_id}: {record.outcome}; left until a restart")
            return
        if reviewing:
            self.settle_launch(record, lambda: review.remove_review(self, record))
        else:
            self.settle_launch(record, lambda: remove_launch(self, record.launch_id))
        log(f"settled launch {record.launch_id} (task {record.task}): {record.outcome}")

    def release_failed(self, record: LaunchRecord, exc: AgentcError) -> str:
        """Note in the record that letting go of its attempt failed (the record is kept for the
        next poll to settle); returns the outcome noted."""
        record.release_failures += 1
        record.outcome = f"release failed: {coordinator.describe_error(exc)}"
        self.records.write(record)
        return record.outcome

    def settle_launch(self, record: LaunchRecord, remove: Callable[[], None]) -> None:
        """How every launch ends once its attempt is let go (or found gone): the record says so
        first (so a crash after this never releases twice), the harness's cost is recorded
        (once per launch), remove() takes away what the launch left, and the record moves to
        finished/."""
        record.released = True
        self.records.write(record)
        role: Role = "reviewer" if record.role == "reviewer" else "implementer"
        run = RunLayout.of_launch(self.state, role, record.launch_id).run
        costs.record_harness_cost(self.config, self.records.root, record, run, now_ms())
        remove()
        self.records.finish(record)

    def _release_dead(self, record: LaunchRecord, private: Path) -> str:
        binding = self.binding_of(record.project)
        with coordinator.session_client(binding, private, record.launch_id) as client:
            coordinator.resolve_pending(client)  # a lost claim answer is finished, not redone
            attempt, generation = record.attempt, record.generation
            held = client.state().attempt
            if attempt is None and held is not None:
                attempt, generation = str(held["id"]), int(held["generation"])
            if attempt is None:
                return "nothing to release (no attempt was claimed)"
            coordinator.revoke_launch_credentials(client, attempt, generation)
            state = coordinator.task_attempt_state(client, attempt)
            if state != "active":
                return f"left as it is ({state or 'unknown'})"
            text = handoff("its launch ended while no supervisor watched it (crash or restart).")
            return coordinator.release(client, attempt, generation, text)
