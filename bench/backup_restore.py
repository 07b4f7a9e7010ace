"""Backup, verification, restore and the recovery exercise on a database of 10,000 tasks with
their history, on SQLite and PostgreSQL.

The database is built through the service's own operations without HTTP: the very mutation
transactions the API runs (`agentc.service.api.mutation`: authentication, idempotency receipt,
operation, audit events), submitted to the service's executor for --lanes tasks at a time (so
SQLite's writer commits them in groups and PostgreSQL's pool runs them side by side). Each task
is created by the admin, then: claimed by a worker agent, checkpointed twice, submitted (code,
evidence per criterion), its cost reported (a cost row naming the attempt), its agent review
claimed and approved with a finding by another agent, its landing recorded by the integrator
(with two checks). Every --send-back-every'th task is first sent back by the integrator (a
failed check) and goes round again: a second attempt, submission and review.

Then the real CLI, as an operator runs it (`agent-coordinator-server`, subprocesses):
`backup` (snapshot + verification + manifest), `backup-verify` (verification again, alone),
`restore` into an empty location, and `recovery-exercise` (backup, restore, the service
started on the copy, scripted reads and writes). Prints each time, the snapshot's size and
the machine's load average before and after.

    uv run python bench/backup_restore.py [--backend sqlite|postgres|both] [--tasks 10000]
        [--lanes 64] [--send-back-every 10]

Not a test: it asserts nothing; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tests.kit import pg  # noqa: E402

from agentc.core.model import (  # noqa: E402
    Access,
    CredentialClass,
    PrincipalKind,
    PrincipalRole,
    TelemetryStream,
)
from agentc.service.api import mutation  # noqa: E402
from agentc.service.auth import Actor, Presented  # noqa: E402
from agentc.service.ops import Op, Runtime  # noqa: E402
from agentc.service.schemas import (  # noqa: E402
    ActivityClaimIn,
    CheckpointIn,
    ClaimIn,
    LandingIn,
    ProjectIn,
    ReviewIn,
    SendBackIn,
    SessionIn,
    SubmissionIn,
    TaskIn,
    TelemetryIn,
)
from agentc.service.work import integration, leases, reviews, telemetry, workflow  # noqa: E402
from agentc.service.work.accounts import (  # noqa: E402
    create_admin,
    issue_agent_credential,
    open_session,
)
from agentc.service.work.projects import create_project  # noqa: E402
from agentc.service.work.tasks import create_task  # noqa: E402
from agentc.store.engine import Database, open_engine  # noqa: E402
from agentc.store.sql import run  # noqa: E402
from agentc.store.tx import Tx  # noqa: E402
from lease_ops import SERVER, load_average, runtime  # noqa: E402

CRITERIA = ["the tests pass", "the docs say what changed", "no new warnings"]
SHA_A, SHA_B, SHA_C = "a" * 40, "b" * 40, "c" * 40


class Builder:
    """The installation: an admin, a project with agent review, workers and reviewers with
    open sessions (one of each per lane), an integrator credential."""

    def __init__(self, rt: Runtime, lanes: int) -> None:
        self.rt = rt
        ex = rt.executor
        admin_id = ex.write(lambda tx: create_admin(tx.conn, tx.now, "admin", "x" * 16))
        self.admin = Actor(admin_id, "admin", PrincipalKind.HUMAN, PrincipalRole.ADMIN)
        body = ProjectIn.model_validate(
            {"name": "bench", "repository_url": "https://example.invalid/r", "review_mode": "agent"}
        )
        self.pid = self.as_admin(lambda op: create_project(op, body))["id"]
        self.workers = [self.agent(f"worker-{i}", CredentialClass.SUPERVISED) for i in range(lanes)]
        self.reviewers = [
            self.agent(f"reviewer-{i}", CredentialClass.SUPERVISED) for i in range(lanes)
        ]
        self.integrator = self.agent("integrator", CredentialClass.INTEGRATOR, session=False)

    def as_admin(self, fn: Callable[[Op], Any]) -> Any:
        return self.rt.executor.write(lambda tx: fn(Op(tx, self.admin, self.rt)).data)

    def new_task(self, i: int) -> Future[Any]:
        body = TaskIn(
            title=f"task {i}: make the parser accept the new syntax",
            description="A task of the benchmark, about as long as a real one. " * 6,
            acceptance_criteria=CRITERIA,
        )
        return self.rt.executor.submit_write(
            lambda tx: create_task(Op(tx, self.admin, self.rt), self.pid, body).data
        )

    def agent(self, name: str, cls: CredentialClass, session: bool = True) -> Presented:
        def issue(tx: Tx) -> dict[str, Any]:
            return issue_agent_credential(
                tx.conn, tx.now, name, cls, Access.WRITE, None, [self.pid]
            )

        cred = self.rt.executor.write(issue)
        if not session:
            return Presented(bearer=cred["token"])
        actor = Actor(
            cred["agent_id"],
            name,
            PrincipalKind.AGENT,
            PrincipalRole.AGENT,
            cred["credential_id"],
            cls,
            Access.WRITE,
        )
        sess = self.rt.executor.write(
            lambda tx: open_session(Op(tx, actor, self.rt), SessionIn(harness="bench")).data
        )
        return Presented(bearer=cred["token"], session_id=sess["session_id"], proof=sess["proof"])

    def submit(self, creds: Presented, path: str, body: Any, fn: Any) -> Future[Any]:
        """One API mutation, queued on the executor (its receipt, events and all)."""
        return self.rt.executor.submit_write(
            mutation(
                self.rt,
                creds,
                f"POST /api/v1/projects/{self.pid}{path}",
                uuid.uuid4().hex,
                body,
                fn,
                project_id=self.pid,
            )
        )


def _data(future: Future[Any]) -> Any:
    status, body, _ = future.result()
    if status >= 300:
        raise RuntimeError(body.decode())
    return json.loads(body)["data"]


def wave(futures: list[Future[Any]]) -> list[Any]:
    return [_data(f) for f in futures]


def build(rt: Runtime, tasks: int, lanes: int, send_back_every: int) -> dict[str, Any]:
    b = Builder(rt, lanes)
    made = 0
    while made < tasks:
        n = min(lanes, tasks - made)
        for future in [b.new_task(made + k) for k in range(n)]:
            future.result()
        rounds = [1 + ((made + k) % send_back_every == 0) for k in range(n)]
        for r in range(max(rounds)):
            going = [k for k in range(n) if rounds[k] > r]
            _round(b, going, last=[rounds[k] == r + 1 for k in going])
        made += n
    return {"project": b.pid}


def _round(b: Builder, lanes: list[int], last: list[bool]) -> None:
    """One attempt of each task, side by side: claim to landing (or a send-back)."""
    pid = b.pid
    w = [b.workers[i] for i in lanes]
    r = [b.reviewers[i] for i in lanes]
    claims = wave(  # the next ready task: only this round's tasks are ready
        [
            b.submit(w[k], "/claims", ClaimIn(), lambda op, x: leases.claim(op, pid, x))
            for k in range(len(w))
        ]
    )
    atts = [c["claim"]["attempt"] for c in claims]
    for step in ("half way: the parser is done", "the tests pass locally"):
        wave(
            [
                b.submit(
                    w[k],
                    f"/attempts/{a['id']}/checkpoints",
                    CheckpointIn(generation=a["generation"], summary=step, handoff=step * 4),
                    lambda op, x, aid=a["id"]: leases.checkpoint(op, pid, aid, x),
                )
                for k, a in enumerate(atts)
            ]
        )
    wave(
        [
            b.submit(
                w[k],
                "/telemetry/cost-rows",
                TelemetryIn(host=f"host-{lanes[k] % 4}", rows=[_cost(w[k], a)]),
                lambda op, x: telemetry.record(op, pid, TelemetryStream.COST, x),
            )
            for k, a in enumerate(atts)
        ]
    )
    subs = wave(
        [
            b.submit(
                w[k],
                f"/attempts/{a['id']}/submissions",
                SubmissionIn.model_validate(
                    {
                        "generation": a["generation"],
                        "kind": "code",
                        "summary": "did it: the parser, its tests and the docs",
                        "acceptance_evidence": [
                            {"criterion": c, "evidence": f"checked: {c} (see the log)"}
                            for c in CRITERIA
                        ],
                        "candidate_ref": (
                            f"refs/agent-coordinator/candidates/{a['task_id']}/{a['id']}"
                        ),
                        "candidate_revision": SHA_A,
                        "base_revision": SHA_B,
                    }
                ),
                lambda op, x, aid=a["id"]: workflow.submit(op, pid, aid, x),
            )
            for k, a in enumerate(atts)
        ]
    )
    acts = [
        (
            s["submission"]["id"],
            next(x["id"] for x in s["activities"] if x["kind"] == "agent_review"),
            next(x["id"] for x in s["activities"] if x["kind"] == "integration"),
        )
        for s in subs
    ]
    rcs = wave(
        [
            b.submit(
                r[k],
                f"/workflow-activities/{rev}/claim",
                ActivityClaimIn(expected_submission_id=sub),
                lambda op, x, rev=rev: reviews.claim_activity(op, pid, rev, x),
            )
            for k, (sub, rev, _) in enumerate(acts)
        ]
    )
    wave(
        [
            b.submit(
                r[k],
                f"/workflow-activities/{rev}/review",
                ReviewIn.model_validate(
                    {
                        "generation": rc["attempt"]["generation"],
                        "submission_id": sub,
                        "decision": "approved",
                        "summary": "good: the tests cover the parser's edge cases",
                        "findings": [{"severity": "advisory", "remedy": "rename the helper"}],
                    }
                ),
                lambda op, x, rev=rev: reviews.decide(op, pid, rev, x),
            )
            for k, ((sub, rev, _), rc) in enumerate(zip(acts, rcs, strict=True))
        ]
    )
    passed = [
        {"name": "unit", "outcome": "passed", "exit_code": 0},
        {"name": "lint", "outcome": "passed", "exit_code": 0},
    ]
    futures = []
    for k, (sub, _, integ) in enumerate(acts):
        if last[k]:
            body: Any = LandingIn.model_validate(
                {
                    "submission_id": sub,
                    "landed_revision": SHA_C,
                    "target_revision": SHA_B,
                    "checks": passed,
                }
            )
            fn: Any = lambda op, x, integ=integ: integration.record_landing(op, pid, integ, x)  # noqa: E731
            path = f"/workflow-activities/{integ}/landing"
        else:
            body = SendBackIn.model_validate(
                {
                    "submission_id": sub,
                    "reason_code": "check_failed",
                    "reason": "check unit failed (exit 1)",
                    "log_tail": "FAILED tests/test_parser.py::test_edge - AssertionError\n" * 20,
                    "checks": [{"name": "unit", "outcome": "failed", "exit_code": 1}],
                }
            )
            fn = lambda op, x, integ=integ: integration.send_back(op, pid, integ, x)  # noqa: E731
            path = f"/workflow-activities/{integ}/send-back"
        futures.append(b.submit(b.integrator, path, body, fn))
    wave(futures)


def _cost(creds: Presented, att: dict[str, Any]) -> dict[str, object]:
    return {
        "session_id": creds.session_id,
        "attempt_id": att["id"],
        "generation": att["generation"],
        "model": "claude-sonnet",
        "input_tokens": 182_000,
        "output_tokens": 21_000,
        "cache_read_tokens": 1_400_000,
        "calls": 57,
        "usd": 1.93,
    }


def cli(database: str, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [SERVER, "--database", database, *args], capture_output=True, text=True, timeout=7200
    )
    took = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{args[0]}: {out.stderr}")
    return took, out


def snapshot_restore(database: str, repo: Path, restore_to: str) -> dict[str, Any]:
    """backup, backup-verify and restore of the snapshot, each timed."""
    took_backup, out = cli(database, "backup", "--repository", str(repo), "--json")
    snap = json.loads(out.stdout)["snapshot"]
    took_verify, _ = cli(
        database, "backup-verify", "--repository", str(repo), "--snapshot", snap["id"]
    )
    took_restore, _ = cli(
        restore_to, "restore", "--repository", str(repo), "--snapshot", snap["id"]
    )
    return {
        "rows": snap["rows"],
        "size": snap["size"],
        "backup_s": took_backup,
        "verify_s": took_verify,
        "restore_s": took_restore,
    }


def age_and_compact(database: str) -> tuple[float, dict[str, Any]]:
    """The history done over a month ago: every receipt's time moved back 40 days (past the
    30-day retention), then `maintenance` as the daily timer runs it."""
    engine = open_engine(Database.parse(database), create=False)
    with engine.begin() as conn:
        run(conn, "UPDATE receipts SET created_at = created_at - :d", d=40 * 24 * 3_600_000)
    engine.dispose()
    took, out = cli(database, "maintenance", "--json")
    return took, json.loads(out.stdout)


def measure(
    database: str, scratch: str, restore_to: list[str], tmp: Path, args: argparse.Namespace
) -> dict[str, Any]:
    rt = runtime(database)
    t0 = time.perf_counter()
    try:
        build(rt, args.tasks, args.lanes, args.send_back_every)
    finally:
        rt.executor.close()
    built = time.perf_counter() - t0
    repo = tmp / "backups"
    fresh = snapshot_restore(database, repo, restore_to[0])
    extra = [] if database.endswith(".sqlite3") else ["--scratch-database", scratch]
    took_exercise, out = cli(
        database,
        "recovery-exercise",
        "--repository",
        str(repo),
        "--scratch",
        str(tmp / "exercise"),
        *extra,
        "--json",
    )
    took_maintenance, compacted = age_and_compact(database)
    return {
        "build_s": built,
        "fresh": fresh,
        "exercise_s": took_exercise,
        "exercise": json.loads(out.stdout),
        "maintenance_s": took_maintenance,
        "compacted": compacted,
        "compacted_snapshot": snapshot_restore(database, repo, restore_to[1]),
    }


def run_backend(backend: str, args: argparse.Namespace) -> None:
    load_before = load_average()
    server = None
    with tempfile.TemporaryDirectory(prefix="agentc-bench-") as name:
        tmp = Path(name)
        try:
            if backend == "sqlite":
                database = str(tmp / "bench.sqlite3")
                scratch = ""
                restore_to = [str(tmp / f"restored{i}.sqlite3") for i in (1, 2)]
            else:
                server = pg.start()
                database = server.create_database("bench")
                scratch = server.create_database("exercise")
                restore_to = [server.create_database(f"restored{i}") for i in (1, 2)]
            found = measure(database, scratch, restore_to, tmp, args)
        finally:
            if server is not None:
                pg.stop(server)
    report(backend, args, found, load_before)


TABLES = (
    "tasks",
    "attempts",
    "checkpoints",
    "submissions",
    "activities",
    "review_decisions",
    "events",
    "receipts",
    "telemetry_rows",
)


def report(backend: str, args: argparse.Namespace, found: dict[str, Any], load: str) -> None:
    fresh, ex = found["fresh"], found["exercise"]
    rows = fresh["rows"]
    print(
        f"{backend}: {args.tasks} tasks (built in {found['build_s']:.0f} s), load average "
        f"{load} before, {load_average()} after"
    )
    print(
        "  rows: " + ", ".join(f"{t} {rows[t]}" for t in TABLES) + f"; {sum(rows.values())} in all"
    )
    for label, m in (
        ("receipts within retention", fresh),
        ("receipts compacted", found["compacted_snapshot"]),
    ):
        print(
            f"  {label}: snapshot {m['size'] / 1e6:.1f} MB; backup (snapshot, verification, "
            f"manifest) {m['backup_s']:.1f} s; backup-verify alone {m['verify_s']:.1f} s; "
            f"restore (into an empty database, migrated, new epoch) {m['restore_s']:.1f} s"
        )
    order = ("backup", "restore", "start", "reads_and_writes")
    steps = ", ".join(f"{k} {ex['steps_seconds'][k]:.1f} s" for k in order)
    print(
        f"  recovery exercise (receipts within retention): {ex['total_seconds']:.1f} s of the "
        f"{ex['target_seconds']:.0f} s target ({steps}); the command took "
        f"{found['exercise_s']:.1f} s"
    )
    receipts = found["compacted"]["receipt_answers"]
    print(
        f"  maintenance after moving the receipts 40 days back: {receipts['rows']} answers, "
        f"{receipts['bytes'] / 1e6:.1f} MB, in {found['maintenance_s']:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--send-back-every", type=int, default=10)
    args = ap.parse_args()
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        run_backend(backend, args)


if __name__ == "__main__":
    main()
