"""The integrator's side of the workflow: a landing makes the task done; a send-back returns it.

Only an integrator credential with write access acts here. A landing records the landed
revision, the target it was built on and the required checks that passed on it; a send-back
(a merge conflict, a failed check, a missing or moved candidate) supersedes the submission and
makes the task ready again, with the reason and the check log's tail on the activity for the
next implementer to read. Neither ever half-applies: both run in one transaction.
"""

from __future__ import annotations

import json
import re

from sqlalchemy.engine import Connection

from agentc.core.model import Access, ActivityKind, ActivityState, CredentialClass, Phase
from agentc.core.rules import bad_request, rfc3339
from agentc.service.auth import Actor, denied
from agentc.service.ops import JsonObject, Op, Result
from agentc.service.schemas import CheckRecord, HoldIn, LandingIn, SendBackIn, TargetRedIn
from agentc.service.screening import KINDS
from agentc.service.work import activities
from agentc.service.work.refusals import conflict, missing
from agentc.service.work.views import project_row
from agentc.store import tasks, workflow
from agentc.store.accounts import live_secret
from agentc.store.sql import fetch_row
from agentc.store.tasks import Task, TaskChanges
from agentc.store.workflow import Activity

_DIGEST = re.compile(r"[0-9a-f]{64}")


def _integration_activity(
    op: Op, project_id: str, activity_id: str, submission_id: str, what: str
) -> Activity:
    """The queued integration activity of ``submission_id``, locked; only an integrator
    credential may act on it."""
    if op.actor.credential_class != CredentialClass.INTEGRATOR or op.actor.access != Access.WRITE:
        raise denied(
            f"only an integrator credential records {what}",
            required_actor=CredentialClass.INTEGRATOR.value,
        )
    act = activities.locked(op, project_id, activity_id)
    if act.kind != ActivityKind.INTEGRATION:
        raise conflict("activity_kind_mismatch", "not an integration activity")
    activities.check_submission(act, submission_id)
    if act.state == ActivityState.WAITING:
        raise conflict("reviews_pending", "the submission is not approved yet")
    if act.state != ActivityState.QUEUED:
        raise conflict("activity_not_eligible", f"the activity is {act.state}")
    return act


def _outcome(act: Activity, **fields: object) -> str:
    """The activity's outcome with ``fields`` set (a hold for a person, once judged, stays)."""
    outcome = json.loads(act.outcome_json) if act.outcome_json else {}
    return json.dumps({**outcome, **fields})


def _checks(checks: list[CheckRecord]) -> list[JsonObject]:
    return [c.model_dump() for c in checks]


def record_landing(op: Op, project_id: str, activity_id: str, body: LandingIn) -> Result:
    """The approved candidate landed: the task is done."""
    act = _integration_activity(op, project_id, activity_id, body.submission_id, "a landing")
    workflow.update_activity(
        op.conn,
        act.id,
        {
            "state": ActivityState.COMPLETED,
            "completed_at": op.now,
            "landed_revision": body.landed_revision,
            "target_revision": body.target_revision,
            "outcome_json": _outcome(
                act, checks=_checks(body.checks), reviewed_diff=body.reviewed_diff
            ),
        },
    )
    op.event(
        "integration.completed",
        project_id,
        act.id,
        submission_id=act.submission_id,
        landed_revision=body.landed_revision,
        checks_passed=len(body.checks),
    )
    activities.complete_task(op, act.task_id)
    return _result(op, act)


def send_back(op: Op, project_id: str, activity_id: str, body: SendBackIn) -> Result:
    """The candidate cannot land: the task goes back to its implementer with the reason."""
    act = _integration_activity(op, project_id, activity_id, body.submission_id, "a send-back")
    sent_back = {"reason_code": body.reason_code, "reason": body.reason, "log_tail": body.log_tail}
    outcome = _outcome(act, sent_back=sent_back, checks=_checks(body.checks))
    workflow.update_activity(
        op.conn, act.id, {"target_revision": body.target_revision, "outcome_json": outcome}
    )
    activities.send_back(op, act.task_id, act.submission_id)
    rounds = _red_round(op, project_id, act.task_id) if body.reason_code == "check_failed" else {}
    sub = act.submission_id
    op.event(
        "integration.sent_back",
        project_id,
        act.id,
        submission_id=sub,
        reason_code=body.reason_code,
        **rounds,
    )
    return _result(op, act)


def _red_round(op: Op, project_id: str, task_id: str) -> JsonObject:
    """Fix-on-red: one more candidate of the task failed a required check. Within the
    project's ``fix_rounds`` the task goes back to an implementer (who starts from that
    candidate); past them it is blocked for a person, every round on its activities."""
    task = op.tx.lock(Task, task_id)
    assert task is not None
    allowed = project_row(op.conn, project_id).fix_rounds
    rounds = task.red_rounds + 1
    changes = TaskChanges(red_rounds=rounds)
    if rounds > allowed:
        changes["blocked_reason"] = (
            f"fix-on-red: a required check failed on {rounds} candidates in a row "
            f"({allowed} fix round(s) allowed); a person decides (each round's checks are on "
            "the task's integration activities)"
        )
    tasks.update_task(op.conn, task_id, changes)
    return {"red_round": rounds, "to_a_person": rounds > allowed}


def hold(op: Op, project_id: str, activity_id: str, body: HoldIn) -> Result:
    """The pre-landing scan found something a person is to judge (the project's integrator
    says so): the submission waits for a human review, shown the finding on the activity; an
    approval queues its integration again, changes requested send it back."""
    act = _integration_activity(op, project_id, activity_id, body.submission_id, "a hold")
    if act.outcome_json and json.loads(act.outcome_json).get("held"):
        raise conflict("already_held", "a person already judged this submission's findings")
    held = {"reason": body.reason, "log_tail": body.log_tail, "at": rfc3339(op.now)}
    workflow.update_activity(
        op.conn,
        act.id,
        {
            "state": ActivityState.WAITING,
            "target_revision": body.target_revision,
            "outcome_json": _outcome(act, held=held),
        },
    )
    review = activities.open_activity(
        op, project_id, act.task_id, act.submission_id, ActivityKind.HUMAN_REVIEW,
        ActivityState.QUEUED,
    )  # fmt: skip
    tasks.update_task(op.conn, act.task_id, TaskChanges(phase=Phase.REVIEW, updated_at=op.now))
    op.event("integration.held", project_id, act.id, submission_id=act.submission_id, review=review)
    return _result(op, act)


def target_red(op: Op, project_id: str, body: TargetRedIn) -> Result:
    """The integrator reports the target failing its own checks (once per target revision:
    its idempotency key): an event the attention digest shows until a landing follows."""
    if op.actor.credential_class != CredentialClass.INTEGRATOR or op.actor.access != Access.WRITE:
        raise denied(
            "only an integrator credential reports the target's checks",
            required_actor=CredentialClass.INTEGRATOR.value,
        )
    project_row(op.conn, project_id)
    failed = [c.name for c in body.checks if c.outcome != "passed"]
    op.event(
        "integration.target_red",
        project_id,
        None,
        target_revision=body.target_revision,
        failed_checks=failed,
        checks=_checks(body.checks),
    )
    return Result({"target_revision": body.target_revision, "failed_checks": failed})


def landing_queue(conn: Connection, project_id: str, limit: int) -> JsonObject:
    """``GET …/integration/queue``: the approved submissions waiting to land on the project's
    target branch, in approval order (the order the integrator takes them)."""
    project = project_row(conn, project_id)
    rows = workflow.landing_queue(conn, project_id, limit)
    return {
        "target_branch": project.target_branch,
        "items": [
            {
                "position": index,
                "activity_id": r.activity_id,
                "task_id": r.task_id,
                "title": r.title,
                "submission_id": r.submission_id,
                "candidate_ref": r.candidate_ref,
                "candidate_revision": r.candidate_revision,
                "base_revision": r.base_revision,
                "approved_at": rfc3339(r.queued_at),
                "held": bool(r.outcome_json and json.loads(r.outcome_json).get("held")),
            }
            for index, r in enumerate(rows, start=1)
        ],
    }


KNOWN_SECRETS_MAX = 64  # verifiers per request: a short query string


def known_secrets(
    conn: Connection, actor: Actor, project_id: str, activity_id: str, verifiers: str, now: int
) -> JsonObject:
    """Which of ``verifiers`` (comma-separated SHA-256 digests of token-shaped strings a
    change adds) is a live secret of this coordinator: the first found, by kind, never more.
    Only an integrator credential asks, about an integration activity of its project."""
    project_row(conn, project_id)
    act = fetch_row(conn, Activity, activity_id)
    if act is None or act.project_id != project_id:
        raise missing(f"no workflow activity {activity_id}")
    if actor.credential_class != CredentialClass.INTEGRATOR:
        raise denied(
            "only an integrator credential asks which secrets are known",
            required_actor=CredentialClass.INTEGRATOR.value,
        )
    if act.kind != ActivityKind.INTEGRATION:
        raise missing(f"no integration activity {activity_id}")
    wanted = verifiers.split(",") if verifiers else []
    if not 1 <= len(wanted) <= KNOWN_SECRETS_MAX or not all(_DIGEST.fullmatch(v) for v in wanted):
        raise bad_request(
            "verifiers",
            f"1-{KNOWN_SECRETS_MAX} SHA-256 hex digests (64 lowercase hex digits), comma-separated",
        )
    hit = live_secret(conn, wanted, now)
    return {"known": [{"verifier": hit.verifier, "kind": KINDS[hit.kind]}] if hit else []}


def _result(op: Op, act: Activity) -> Result:
    return Result(
        {
            "activity": activities.activity_now(op, act.id),
            "task": activities.task_now(op, act.task_id),
        }
    )
