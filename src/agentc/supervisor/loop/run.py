"""``agentc-supervisor run``: the live loop (docs/supervisor.md).

The loop keeps up to ``[run] launches`` launches running at once (:mod:`.slots`), each in a
worker process of its own (:mod:`.workers`). Each poll settles what an earlier poll or loop
left (:mod:`.recovery`), takes reviews while a slot is free when ``[run] reviewer`` is on
(:func:`agentc.supervisor.loop.review.take`), then, while an implementer slot is free, checks
the implementer's admission for one more launch, asks ``next`` and starts the offered launch
(:class:`~agentc.supervisor.loop.implementer.ImplementerLaunch`). Between polls the loop waits,
collecting the launches that end and beating the heartbeat (which lists the running launches);
a launch that ran frees its slot for a poll at once. SIGTERM or SIGINT stop new claims, stop
every running launch (each drained, its attempt or review released with a handoff) and end the
loop once they all ended.

Personal mode runs as one unprivileged user and launches as that user. Host mode runs as root
(:func:`.checks.unsupported` refuses it otherwise) and launches each implementer and reviewer as its
role account (:mod:`.hostlaunch`), after :func:`.checks.host_checks` found the accounts, the state
layout and the loop's credentials fit.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from agentc.client import reads
from agentc.client.ops import Agent
from agentc.core.errors import AgentcError, ConfigError
from agentc.core.roles import Role, role_slug
from agentc.files import UnsafeFile
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import preflight_host
from agentc.supervisor.launch.rundir import RunLayout
from agentc.supervisor.loop import admission, coordinator, costs, recovery, review, signin, slots
from agentc.supervisor.loop.checks import (
    check_binding,
    check_canary_binding,
    check_reviewer_binding,
)
from agentc.supervisor.loop.costs import Summary
from agentc.supervisor.loop.implementer import ImplementerLaunch
from agentc.supervisor.loop.launching import LeasedLaunch, log
from agentc.supervisor.loop.records import HARNESS_LEDGER, LaunchRecord, Records, now_ms
from agentc.supervisor.loop.workers import Launches, Worker

Entry = str | Worker  # what one ask of a poll gave: an outcome, or the launch it started

LOOP_SESSION = "loop"
REVIEW_SESSION = "reviewer"
COSTS_RETRY_MS = 10 * 60 * 1000
TASK_OFFERS = ("claim_task", "recover_task")  # what an implementer launch takes from next


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
        self.slots = slots.size(config)  # refused here, before anything is written
        self.state = config.resolved_state_dir()
        self.records = Records(self.state)
        self.mirror = self.state / "mirror.git"
        canary = config.run.canary_binding
        self.canary_mirror = (canary.mirror if canary else None) or self.state / "mirror-canary.git"
        self.stopping = False
        self.iteration = 0
        self.outcome = "Idle"
        self.given_up: set[str] = set()
        self.started: set[str] = set()  # this poll's tasks and review activities
        self.costs_retry_at = 0
        self.expiry_warned_at = float("-inf")
        # The last admission's holds and unusable vendors, in the heartbeat (docs/attention.md).
        self.admission = admission.Admission(None, {}, [])
        self.launches = Launches(
            self.slots, self.heartbeat, lambda: self.stopping, config.run.heartbeat_seconds
        )

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
        """Poll until told to stop (``once``: one poll, and every launch it started runs to
        its end before the loop returns)."""

        def stop(_signum: int, _frame: object) -> None:
            self.stopping = True
            self.launches.signal(signal.SIGTERM)  # each drains its launch

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop)
        self.start()
        log(self.slots.line())
        while True:
            self.iteration += 1
            try:
                entries = self.poll(wait=once)
            except (AgentcError, OSError) as exc:  # a claimed attempt stays recorded: settled
                entries = [f"Failed({coordinator.describe_error(exc)!r})"]
            if once or self.stopping:
                self.launches.drain()
            self.outcome = "; ".join(e.entry() if isinstance(e, Worker) else e for e in entries)
            log(f"poll {self.iteration}: {self.outcome}")
            self.heartbeat()
            self.report_costs()
            self.launches.reap_strays()
            if once or self.stopping:
                # Again: a stop that came after the drain above (while this poll was recorded)
                # leaves no launch behind (its worker would die with the loop, not drain).
                self.launches.drain()
                return 0
            # The next poll: after poll_seconds, or at once when a launch that ran frees a slot.
            self.launches.freed = False
            self.launches.wait_for(
                lambda: self.launches.freed and self.launches.free("reviewer"),
                time.monotonic() + self.config.run.poll_seconds,
            )

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

    def _cost_client(self, reviewing: bool, project: str) -> AbstractContextManager[Agent]:
        """The client reporting a project's rows: the reviewer's or the implementer's, of the
        binding serving the project (else the main one)."""
        try:
            if reviewing:
                return self.review_client(self.reviewer_of(project))
            return self.client(self.binding_of(project))
        except ConfigError:
            return self.review_client() if reviewing else self.client()

    def heartbeat(self) -> None:
        """``heartbeat.json``: the last poll, the holds, the unusable vendors and the running
        launches (``launch``: the oldest of them, as readers of one launch know it)."""
        data: dict[str, Any] = {
            "iteration": self.iteration,
            "outcome": self.outcome,
            "holds": self.admission.holds,
            "vendors": self.admission.unusable,
            "launches": self.launches.live(),
            "slots": {"launches": self.slots.total, "reviews": self.slots.reviews},
        }
        if data["launches"]:
            data["launch"] = launch = data["launches"][0]
            # A launch may sit out its vendor's rate limit (a harness retries a 429 after its
            # reset): the vendors as they are now, not as the last admission found them.
            data["vendors"] = admission.unusable_now(self.config, launch.get("role", "implementer"))
        self.records.write_heartbeat(data)

    def claimed(self, launch_id: str) -> None:
        """In a launch's worker: its claim is held (the loop may ask for more work)."""
        self.launches.claimed(launch_id)

    def launch(self, launch: LeasedLaunch) -> Worker:
        """Start ``launch`` in a worker of its own; returns once it holds its claim or ended."""
        return self.launches.start(launch)

    def running(self, role: str) -> list[admission.Running]:
        """The running launches of ``role``, as admission counts them."""
        return [admission.Running(*launch) for launch in self.launches.running(role)]

    def poll(self, wait: bool = False) -> list[Entry]:
        """One poll: settle, then reviews and implementer work while slots are free (with
        ``wait``, a full loop waits for a free slot before each ask instead)."""
        self.warn_expiring()
        self.launches.collect()
        refused = recovery.settle(self, {w.launch_id for w in self.launches.workers.values()})
        if refused is not None:
            return [refused]
        stopping = 'Refused("the loop is stopping; no new claims")'
        if self.stopping:
            return [stopping]
        entries: list[Entry] = []
        self.started = set()
        for binding in self.reviewers():
            entries += self.fill("reviewer", wait, functools.partial(review.take, self, binding))
            if self.stopped():  # a signal while a review started
                return entries or [stopping]
        if not self.launches.free("implementer") and not wait:
            return [*entries, f"Busy({len(self.launches.workers)} launches running)"]
        return [*entries, *self.fill("implementer", wait, self.implement)]

    def fill(self, role: str, wait: bool, ask: Callable[[], Entry | None]) -> list[Entry]:
        """Ask for work of ``role`` while its slots are free (``wait``: waiting for one each
        time), until an ask starts no launch that holds its claim."""
        entries: list[Entry] = []
        most = self.slots.total if role == "reviewer" else self.slots.implementers
        for _ in range(most):
            if not self.launches.free(role):
                if not wait:
                    break
                self.launches.wait_for(lambda: self.launches.free(role))
                if self.stopped():
                    break
            got = ask()
            if got is None:
                break
            entries.append(got)
            if not isinstance(got, Worker) or not got.claimed:
                break
        return entries

    def reviewers(self) -> list[coordinator.Binding]:
        """The reviewer's bindings, in the order reviews are taken: the canary project's
        first, then the reviewer's project (none without ``[run] reviewer``)."""
        if self.reviewer is None:
            return []
        canary = [self.canary_reviewer] if self.canary_reviewer is not None else []
        return [*canary, self.reviewer]

    def stopped(self) -> bool:
        """Whether the loop was told to stop (read again after each wait)."""
        return self.stopping

    def reviewer_of(self, project: str) -> coordinator.Binding:
        """The reviewer binding serving ``project`` (a review record's)."""
        for binding in self.reviewers():
            if binding.project_id == project:
                return binding
        raise ConfigError(
            f"run.reviewer_binding: a review of project {project} was left, which no reviewer "
            "binding names; restore its binding to settle it"
        )

    def implement(self) -> Entry:
        """One implementer ask: admission for one more launch, ``next``, the launch started."""
        self.admission = admission.measure(self.config, "implementer", self.running("implementer"))
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
                    action = reads.offered(client, TASK_OFFERS)
            except AgentcError as exc:  # the other project is still asked (an unsafe file too)
                failed.append(f"next{where}: {coordinator.describe_error(exc)}")
                log(f"{failed[-1]} (the other projects are still asked)")
                continue
            if action is None:
                continue
            task = str(action.get("task_id"))
            if task in self.started:  # given back already: the next poll's
                continue
            held = self.held(task)
            if held is not None:
                holds.append(held)
                continue
            self.started.add(task)
            return self.launch(ImplementerLaunch(self, action, vendor, binding, mirror))
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
        return self.served(project)[0]

    def served(self, project: str) -> tuple[coordinator.Binding, Path]:
        """The binding serving ``project`` and its mirror; refused when none does."""
        for binding, mirror in self.bindings():
            if binding.project_id == project:
                return binding, mirror
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

    def client(self, binding: coordinator.Binding | None = None) -> AbstractContextManager[Agent]:
        """The loop's own client (``next``, reads) for ``binding`` (none: the main one)."""
        if binding is None or binding is self.binding:
            return coordinator.session_client(
                self.binding, self.records.root / "client", LOOP_SESSION
            )
        return coordinator.session_client(
            binding, self.records.root / "client-canary", LOOP_SESSION
        )

    def review_client(
        self, binding: coordinator.Binding | None = None
    ) -> AbstractContextManager[Agent]:
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
            url = reads.project(client)["repository_url"]
        if not url:
            raise ConfigError(f"setup.{project}.repository_url: the project names no repository")
        return url, branch

    # -- how launches end -------------------------------------------------------------------

    def release_failed(self, record: LaunchRecord, exc: AgentcError) -> str:
        """Note in the record that letting go of its attempt failed (the record is kept for the
        next poll to settle); returns the outcome noted. Only a refusal counts toward giving up
        (``MAX_RELEASE_TRIES``): a coordinator out of reach (a host cut off from it) is tried
        again at every poll until it answers."""
        if not coordinator.transient(exc):
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
