"""Request bodies. Unknown fields are refused and types are strict, so a wrong field or type
is a 4xx that names it, never a guess.

The shapes an agent also writes (evidence, findings, submissions, reviews) and the field types
are defined once in `agentc.core.wire`; this module adds the service-only bodies.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from agentc.core import model as m
from agentc.core.rules import NAME_PATTERN
from agentc.core.wire import (
    Body,
    ByValue,
    Counter,
    Criteria,
    Handoff,
    Id,
    Review,
    Revision,
    Submission,
    Summary,
    text,
)

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Label = Annotated[str, text(200, min_length=1)]
Note = Annotated[str, text(4096)]
Reason = Annotated[str, text(4096, min_length=1)]
Title = Annotated[str, text(300, min_length=1)]
Description = Annotated[str, text(32768)]
RepositoryUrl = Annotated[str, text(2048, min_length=1)]
Branch = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s\x00]+$")]
TargetBranch = Annotated[
    str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s\x00-][^\s\x00]*$")
]
LeaseSeconds = Annotated[int, Field(ge=m.LEASE_SECONDS_MIN, le=m.LEASE_SECONDS_MAX)]
MaxAttemptSeconds = Annotated[int, Field(ge=0, le=m.MAX_ATTEMPT_SECONDS_MAX)]
ParkAfterAttempts = Annotated[int, Field(ge=m.PARK_AFTER_MIN, le=m.PARK_AFTER_MAX)]
FixRounds = Annotated[int, Field(ge=m.FIX_ROUNDS_MIN, le=m.FIX_ROUNDS_MAX)]
Priority = Annotated[int, Field(ge=m.PRIORITY_URGENT, le=m.PRIORITY_LOW)]
DependsOn = Annotated[list[Id], Field(max_length=m.DEPENDENCIES_MAX)]


class LoginIn(Body):
    username: Annotated[str, text(100, min_length=1)]
    password: Annotated[str, text(1024, min_length=1)]


class AgentIn(Body):
    name: Name
    # The credential's own name (where it is used: "laptop", "build-host-2"); a rotation
    # keeps it. Several credentials of one agent are told apart by it.
    credential_name: Name = "initial"
    credential_class: ByValue[m.CredentialClass] = m.CredentialClass.INTERACTIVE
    access: ByValue[m.Access] = m.Access.WRITE
    # Granted to the agent (its principal) in the same transaction as the credential.
    projects: Annotated[list[Id], Field(max_length=100)] = []


class GrantIn(Body):
    """Grant a principal a project; the role defaults to the principal's kind (agent for
    agents, operator for people)."""

    project_id: Id
    role: ByValue[m.ProjectRole] | None = None


class SessionIn(Body):
    session_id: (
        Annotated[
            str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._-]+$")
        ]
        | None
    ) = None
    harness: Label
    workstation_id: Label | None = None
    capabilities: Annotated[list[Annotated[str, text(128)]], Field(max_length=64)] = []


class RequiredCheck(Body):
    identity: Label
    version: Label = "1"
    environment: Label = "default"


RequiredChecks = Annotated[list[RequiredCheck], Field(max_length=100)]


class ProjectIn(Body):
    name: Annotated[str, text(120, min_length=1)]
    repository_url: RepositoryUrl
    target_branch: TargetBranch = "main"
    review_mode: ByValue[m.ReviewMode] = m.ReviewMode.AGENT
    lease_seconds: LeaseSeconds = m.LEASE_SECONDS_DEFAULT
    max_attempt_seconds: MaxAttemptSeconds = 0
    required_checks: RequiredChecks = []
    admit_agent_tasks: bool = False
    park_after_attempts: ParkAfterAttempts = m.PARK_AFTER_DEFAULT
    fix_rounds: FixRounds = m.FIX_ROUNDS_DEFAULT


class PolicyIn(Body):
    expected_revision: Counter
    repository_url: RepositoryUrl | None = None
    target_branch: TargetBranch | None = None
    review_mode: ByValue[m.ReviewMode] | None = None
    lease_seconds: LeaseSeconds | None = None
    max_attempt_seconds: MaxAttemptSeconds | None = None
    required_checks: RequiredChecks | None = None
    admit_agent_tasks: bool | None = None
    park_after_attempts: ParkAfterAttempts | None = None
    fix_rounds: FixRounds | None = None


class TaskIn(Body):
    title: Title
    description: Description = ""
    acceptance_criteria: Criteria
    kind: ByValue[m.TaskKind] = m.TaskKind.CODE
    priority: Priority = m.PRIORITY_DEFAULT
    depends_on: DependsOn = []
    planned: bool = False
    admission_class: Literal["canary"] | None = None


class TaskEditIn(Body):
    expected_revision: Counter
    title: Title | None = None
    description: Description | None = None
    acceptance_criteria: Criteria | None = None
    priority: Priority | None = None
    depends_on: DependsOn | None = None
    planned: bool | None = None


class CancelIn(Body):
    expected_revision: Counter
    reason: Reason


class ClaimIn(Body):
    task_id: Id | None = None
    expected_task_revision: Counter | None = None


class GenerationIn(Body):
    generation: Counter


class RenewIn(Body):
    generation: Counter
    # What the agent is doing now, as its supervisor read it from the launch's stream (agent
    # text, screened like any body), and what its model calls cost so far by the supervisor's
    # meter: shown live on the task page (docs/console.md).
    step: Annotated[str, text(300)] | None = None
    spent_usd: Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)] | None = None
    spent_tokens: Annotated[int, Field(ge=0, le=4 * 10**12)] | None = None


class CheckpointIn(Body):
    generation: Counter
    summary: Summary
    handoff: Handoff | None = None
    current_action: Note | None = None
    next_step: Note | None = None
    revision: Revision | None = None


class ReleaseIn(Body):
    generation: Counter
    handoff: Annotated[str, text(16384, min_length=1)]
    blocked: bool = False


# The generation comes first in the bodies below (pydantic orders a subclass's fields from its
# last base to its first), so the schema and the first problem reported keep their order.
class SubmissionIn(Submission, GenerationIn):
    pass


class ActivityClaimIn(Body):
    expected_submission_id: Id


class _ReviewTarget(Body):
    generation: Counter | None = None
    submission_id: Id


class ReviewIn(Review, _ReviewTarget):
    pass


class ActivityReleaseIn(Body):
    generation: Counter
    summary: Summary


class CheckRecord(Body):
    """One required check the integrator ran on the landed revision."""

    name: Label
    outcome: Literal["passed", "failed", "timed_out"]
    exit_code: Annotated[int, Field(ge=m.EXIT_CODE_MIN, le=m.EXIT_CODE_MAX)] | None = None
    command: Annotated[str, text(2000)] = ""  # what ran, for the console
    duration_ms: Annotated[int, Field(ge=0, le=m.COUNTER_MAX)] | None = None
    tail: Annotated[str, text(4096)] = ""  # the end of its output
    flaky: bool = False  # it failed, then passed when run once more on the same revision


LogTail = Annotated[str, text(16384)]
Checks = Annotated[list[CheckRecord], Field(max_length=50)]


class LandingIn(Body):
    submission_id: Id
    landed_revision: Revision
    target_revision: Revision | None = None  # the target the landed revision was built on
    checks: Checks = []
    # the landed commit's Agentc-Reviewed-Diff trailer, shown beside the recorded patch's
    reviewed_diff: Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None


class SendBackIn(Body):
    """The integrator could not land the candidate: the task goes back to its implementer."""

    submission_id: Id
    reason_code: Literal[
        "conflict", "check_failed", "candidate_missing", "candidate_invalid", "scan_finding"
    ]
    reason: Reason
    log_tail: LogTail = ""
    target_revision: Revision | None = None
    checks: Checks = []


class TargetRedIn(Body):
    """The target branch fails its own required checks: integration waits until it is green."""

    target_revision: Revision
    checks: Checks = []


class HoldIn(Body):
    """The integrator's pre-landing scan found something a person is to judge: the submission
    waits for a person's review before it can land."""

    submission_id: Id
    reason: Reason
    log_tail: LogTail = ""
    target_revision: Revision | None = None


class TelemetryIn(Body):
    host: Annotated[str, text(255, min_length=1)]
    rows: Annotated[list[dict[str, object]], Field(min_length=1, max_length=1000)]


class UnblockIn(Body):
    expected_revision: Counter
    reason: Reason


class ApproveIn(Body):
    expected_revision: Counter


class CheckoutIn(Body):
    generation: Counter
    path: Annotated[str, text(4096, min_length=1)]
    branch: Branch
    base_revision: Revision
    workstation_id: Label | None = None
