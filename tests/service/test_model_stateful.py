"""A stateful property test of the work model over the real API and database.

Random claims, renewals, checkpoints, releases, submissions, reviews and landings by several
agents, with service time moved by the test; after every step the invariants must hold:
never two active attempts on a task (or an activity), generations only grow, a done task never
changes again.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from agentc.service.auth import BROWSER_SESSION_MS
from tests.service.kit import (
    ADMIN_PASSWORD,
    SHA_A,
    SHA_B,
    ApiError,
    Caller,
    Clock,
    Service,
    evidence,
)

_dir = tempfile.TemporaryDirectory(prefix="agentc-stateful-")
CLOCK = Clock()
SERVICE: Service | None = None
AGENTS: list[Caller] = []
INTEGRATOR: Caller | None = None
ADMIN_SINCE = 0


def service() -> Service:
    global SERVICE, INTEGRATOR, ADMIN_SINCE
    if SERVICE is None:
        SERVICE = Service(str(Path(_dir.name) / "db.sqlite3"), CLOCK)
        AGENTS.extend(SERVICE.agent() for _ in range(3))
        INTEGRATOR = SERVICE.agent(credential_class="integrator", session=False)
        ADMIN_SINCE = CLOCK.now
    elif CLOCK.now - ADMIN_SINCE > BROWSER_SESSION_MS // 2:
        # The examples share one service and its clock: sign the admin in again before its
        # browser session (12 h of service time) lapses, or setup fails depending on the seed.
        SERVICE.admin = SERVICE.login("admin", ADMIN_PASSWORD)
        ADMIN_SINCE = CLOCK.now
    return SERVICE


ALLOWED = {
    "claim_conflict",
    "lease_expired",
    "operation_not_permitted",
    "revision_conflict",
    "reviewer_not_independent",
    "activity_not_eligible",
    "attempt_duration_exceeded",
    "record_not_found",
    "workflow_revision_conflict",
    "reviews_pending",
    "activity_kind_mismatch",
    "pinned_revision_changed",
}


class WorkModel(RuleBasedStateMachine):
    @initialize(
        review_mode=st.sampled_from(["none", "agent", "either"]),
        lease=st.sampled_from([30, 600, 600]),
        cap=st.sampled_from([0, 600]),
    )
    def setup(self, review_mode: str, lease: int, cap: int) -> None:
        self.svc = service()
        self.pid = self.svc.project(
            review_mode=review_mode, lease_seconds=lease, max_attempt_seconds=cap
        )
        assert INTEGRATOR is not None
        for agent in [*AGENTS, INTEGRATOR]:
            self.svc.grant(agent, self.pid)
        self.tasks: list[str] = []
        self.generations: dict[str, int] = {}
        self.done: dict[str, Any] = {}
        self.held: list[tuple[int, dict[str, Any]]] = []  # (agent, attempt) from claims

    def _call(self, caller: Caller, method: str, path: str, body: Any = None) -> Any:
        try:
            return caller.call(method, f"/api/v1/projects/{self.pid}{path}", body)
        except ApiError as err:
            assert err.status < 500, err.body
            assert err.code in ALLOWED, err.body
            return None

    def _task(self, index: int) -> dict[str, Any] | None:
        if not self.tasks:
            return None
        tid = self.tasks[index % len(self.tasks)]
        task: dict[str, Any] = self.svc.admin.get(f"/api/v1/projects/{self.pid}/tasks/{tid}")
        return task

    @rule(
        kind=st.sampled_from(["general", "code"]),
        dep=st.integers(0, 10),
        with_dep=st.sampled_from([False, False, False, True]),
    )
    def create(self, kind: str, dep: int, with_dep: bool) -> None:
        depends = [self.tasks[dep % len(self.tasks)]] if with_dep and self.tasks else []
        task = self.svc.task(
            self.pid, kind=kind, depends_on=depends, acceptance_criteria=["a", "b"]
        )
        self.tasks.append(task["id"])

    @rule(agent=st.integers(0, 2), index=st.integers(0, 20))
    def claim(self, agent: int, index: int) -> None:
        task = self._task(index)
        if task is None:
            return
        self._hold(
            agent,
            self._call(
                AGENTS[agent],
                "POST",
                "/claims",
                {"task_id": task["id"], "expected_task_revision": task["revision"]},
            ),
        )

    @rule(agent=st.integers(0, 2))
    def claim_next(self, agent: int) -> None:
        self._hold(agent, self._call(AGENTS[agent], "POST", "/claims", {}))

    def _hold(self, agent: int, result: Any) -> None:
        if result and result.get("claim"):
            self.held.insert(0, (agent, result["claim"]["attempt"]))

    def _held(self, index: int) -> tuple[Caller, dict[str, Any]] | None:
        if not self.held:
            return None
        agent, attempt = self.held[index % len(self.held)]
        return AGENTS[agent], attempt

    @rule(
        index=st.integers(0, 20),
        stale=st.sampled_from([False, False, False, True]),
        other=st.sampled_from([False, False, False, True]),
        verb=st.sampled_from(["renew", "checkpoints", "release", "release-blocked"]),
    )
    def lease_op(self, index: int, stale: bool, other: bool, verb: str) -> None:
        held = self._held(index)
        if held is None:
            return
        owner, attempt = held
        if other:  # another session tries the owner's attempt
            owner = AGENTS[(AGENTS.index(owner) + 1) % len(AGENTS)]
        gen = attempt["generation"] - (1 if stale else 0)
        body: dict[str, Any] = {"generation": gen}
        if verb == "checkpoints":
            body["summary"] = "progress"
        if verb.startswith("release"):
            body.update(handoff="handing off", blocked=verb == "release-blocked")
            verb = "release"
        self._call(owner, "POST", f"/attempts/{attempt['id']}/{verb}", body)

    @rule(index=st.integers(0, 20))
    def unblock(self, index: int) -> None:
        task = self._task(index)
        if task and task["blocked_reason"] and task["lifecycle"] == "open":
            self._call(
                self.svc.admin,
                "POST",
                f"/tasks/{task['id']}/unblock",
                {"expected_revision": task["revision"], "reason": "ok"},
            )

    @rule(index=st.integers(0, 20), stale=st.sampled_from([False, False, False, True]))
    def submit(self, index: int, stale: bool) -> None:
        held = self._held(index)
        if held is None:
            return
        owner, attempt = held
        task = self.svc.admin.get(f"/api/v1/projects/{self.pid}/tasks/{attempt['task_id']}")
        body: dict[str, Any] = {
            "generation": attempt["generation"] - (1 if stale else 0),
            "kind": task["kind"],
            "summary": "done",
            "acceptance_evidence": evidence(["a", "b"]),
        }
        if task["kind"] == "code":
            body.update(
                candidate_ref=f"refs/agent-coordinator/candidates/{task['id']}/x",
                candidate_revision=SHA_A,
                base_revision=SHA_B,
            )
        self._call(owner, "POST", f"/attempts/{attempt['id']}/submissions", body)

    @rule(agent=st.integers(0, 2), approve=st.booleans())
    def review(self, agent: int, approve: bool) -> None:
        reviewer = AGENTS[agent]
        nxt = reviewer.get(f"/api/v1/projects/{self.pid}/next?role=reviewer")["action"]
        if nxt is None:
            return
        claimed = self._call(
            reviewer,
            "POST",
            f"/workflow-activities/{nxt['activity_id']}/claim",
            {"expected_submission_id": nxt["submission_id"]},
        )
        if claimed is None:
            return
        self._call(
            reviewer,
            "POST",
            f"/workflow-activities/{nxt['activity_id']}/review",
            {
                "generation": claimed["attempt"]["generation"],
                "submission_id": nxt["submission_id"],
                "decision": "approved" if approve else "changes_requested",
                "summary": "r",
            },
        )

    @rule(index=st.integers(0, 20))
    def land(self, index: int) -> None:
        task = self._task(index)
        if task is None:
            return
        for act in task["workflow"]["activities"]:
            if act["kind"] == "integration" and act["state"] == "queued":
                assert INTEGRATOR is not None
                self._call(
                    INTEGRATOR,
                    "POST",
                    f"/workflow-activities/{act['id']}/landing",
                    {"submission_id": act["submission_id"], "landed_revision": SHA_A},
                )

    @rule(seconds=st.sampled_from([1, 1, 5, 10, 29, 30, 61, 700]))
    def advance(self, seconds: int) -> None:
        CLOCK.advance(seconds)

    @invariant()
    def model_holds(self) -> None:
        if not getattr(self, "tasks", None):
            return

        def snapshot(tx: Any) -> Any:
            conn = tx.conn
            ids = ",".join(f"'{t}'" for t in self.tasks)
            tasks = conn.exec_driver_sql(
                f"SELECT id, generation, lifecycle, revision, current_attempt_id, phase "
                f"FROM tasks WHERE id IN ({ids})"
            ).all()
            active = conn.exec_driver_sql(
                f"SELECT task_id, activity_id, count(*) FROM attempts WHERE state = 'active' "
                f"AND task_id IN ({ids}) GROUP BY task_id, activity_id"
            ).all()
            counts = conn.exec_driver_sql(
                f"SELECT task_id, count(*), max(generation) FROM attempts "
                f"WHERE activity_id IS NULL AND task_id IN ({ids}) GROUP BY task_id"
            ).all()
            return tasks, active, counts

        tasks, active, counts = self.svc.executor.read(snapshot)
        for _task, _activity, n in active:
            assert n == 1, "two active attempts on one task or activity"
        max_gen = {t: g for t, _n, g in counts}
        for tid, gen, lifecycle, revision, current, phase in tasks:
            assert gen >= self.generations.get(tid, 0), "a generation went backwards"
            self.generations[tid] = gen
            assert gen == max_gen.get(tid, 0), "generation and attempts disagree"
            state = json.dumps(
                [
                    gen,
                    lifecycle,
                    revision,
                    current,
                    phase,
                    dict((t, n) for t, n, _g in counts).get(tid, 0),
                ]
            )
            if tid in self.done:
                assert self.done[tid] == state, "a done task changed"
            elif lifecycle == "done":
                self.done[tid] = state


WorkModel.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_work_model = pytest.mark.slow(WorkModel.TestCase)
