"""The integrator's side of the workflow: a landing makes the task done; a send-back returns it.

Only an integrator credential with write access acts here. A landing records the landed
revision, the target it was built on and the required checks that passed on it; a send-back
(a merge conflict, a failed check, a missing or moved candidate) supersedes the submission and
makes the task ready again, with the reason and the check log's tail on the activity for the
next implementer to read. Neither ever half-applies: both run in one transaction.
"""

from __future__ import annotations

import json

from agentc.core.model import Access, ActivityKind, ActivityState, CredentialClass
from agentc.service.auth import denied
from agentc.service.ops import JsonObject, Op, Result
from agentc.service.schemas import CheckRecord, LandingIn, SendBackIn
from agentc.service.work import activities
from agentc.service.work.refusals import conflict
from agentc.store import workflow
from agentc.store.workflow import Activity


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
            "outcome_json": json.dumps(
                {"checks": _checks(body.checks), "reviewed_diff": body.reviewed_diff}
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
    outcome = {
        "sent_back": {
            "reason_code": body.reason_code,
            "reason": body.reason,
            "log_tail": body.log_tail,
        },
        "checks": _checks(body.checks),
    }
    workflow.update_activity(
        op.conn,
        act.id,
        {"target_revision": body.target_revision, "outcome_json": json.dumps(outcome)},
    )
    activities.send_back(op, act.task_id, act.submission_id)
    sub = act.submission_id
    op.event(
        "integration.sent_back", project_id, act.id, submission_id=sub, reason_code=body.reason_code
    )
    return _result(op, act)


def _result(op: Op, act: Activity) -> Result:
    return Result(
        {
            "activity": activities.activity_now(op, act.id),
            "task": activities.task_now(op, act.task_id),
        }
    )
