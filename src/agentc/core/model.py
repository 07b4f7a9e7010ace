"""The work model's vocabulary: states, kinds, limits. Pure values, no I/O."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class ReviewMode(StrEnum):
    NONE = "none"
    AGENT = "agent"
    HUMAN = "human"
    BOTH = "both"
    EITHER = "either"


class TaskKind(StrEnum):
    CODE = "code"
    GENERAL = "general"


class Lifecycle(StrEnum):
    PLANNED = "planned"
    OPEN = "open"
    DONE = "done"
    CANCELED = "canceled"


class WorkStatus(StrEnum):
    """Derived on read from the stored facts; never stored."""

    PLANNED = "planned"
    PROPOSED = "proposed"  # planned, filed by an agent, waiting for a person's approval
    READY = "ready"
    IN_PROGRESS = "in_progress"
    BLOCKED = "blocked"
    RECOVERY_REQUIRED = "recovery_required"
    WAITING_REVIEW = "waiting_review"
    WAITING_INTEGRATION = "waiting_integration"
    DONE = "done"
    CANCELED = "canceled"


class AttemptState(StrEnum):
    ACTIVE = "active"
    SUBMITTED = "submitted"
    RELEASED = "released"
    BLOCKED = "blocked"
    EXPIRED = "expired"
    CANCELED = "canceled"


class AttemptMode(StrEnum):
    WORK = "work"
    RECOVERY = "recovery"
    REVIEW = "review"


class Role(StrEnum):
    """What an agent asks the coordinator for: work to implement, or a review to make."""

    IMPLEMENTER = "implementer"
    REVIEWER = "reviewer"


class Phase(StrEnum):
    """Where a task stands in its completion workflow (null before the first submission)."""

    REVIEW = "review"
    INTEGRATION = "integration"
    REVISION_NEEDED = "revision_needed"
    DONE = "done"


class ActivityKind(StrEnum):
    AGENT_REVIEW = "agent_review"
    HUMAN_REVIEW = "human_review"
    EITHER_REVIEW = "either_review"
    INTEGRATION = "integration"


class ActivityState(StrEnum):
    WAITING = "waiting"  # integration before the reviews are satisfied
    QUEUED = "queued"
    ACTIVE = "active"
    COMPLETED = "completed"
    CANCELED = "canceled"


class Decision(StrEnum):
    APPROVED = "approved"
    CHANGES_REQUESTED = "changes_requested"


class Severity(StrEnum):
    """A review finding's weight: a required one blocks approval."""

    REQUIRED = "required"
    ADVISORY = "advisory"


class AmendmentDecision(StrEnum):
    """A reviewer's answer to a submission's acceptance-criteria amendment."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"


class CredentialClass(StrEnum):
    INTERACTIVE = "interactive"
    SUPERVISED = "supervised"
    INTEGRATOR = "integrator"
    # Minted by the session holding one attempt, for the launch working on it: bound to that
    # attempt and its session, valid only while the attempt is active (service/work/launch_access).
    ATTEMPT = "attempt"


class Access(StrEnum):
    WRITE = "write"
    READ = "read"


# Limits (inclusive), shared by validation and the API schema.
LEASE_SECONDS_MIN, LEASE_SECONDS_MAX, LEASE_SECONDS_DEFAULT = 30, 3600, 600
# Checkpoints one attempt may record: far more than any agent's milestones, and a bound on what
# one attempt (a launch's credential among others) can write.
CHECKPOINTS_PER_ATTEMPT_MAX = 1000
MAX_ATTEMPT_SECONDS_MIN, MAX_ATTEMPT_SECONDS_MAX = 600, 604800
CRITERIA_MIN, CRITERIA_MAX = 1, 100
PRIORITY_URGENT, PRIORITY_LOW, PRIORITY_DEFAULT = 0, 3, 2
DEPENDENCIES_MAX = 100
AGENT_TASK_WEEKLY_BUDGET_DEFAULT = 5
# Fruitless attempts (ended without a submission): the delay before the task is offered again
# after the n-th in a row (BACKOFF_BASE_MS doubling, at most BACKOFF_CAP_MS), and the project
# setting that parks the task after that many in a row (0: neither backoff nor parking).
BACKOFF_BASE_MS, BACKOFF_CAP_MS = 60_000, 3_600_000
PARK_AFTER_MIN, PARK_AFTER_MAX, PARK_AFTER_DEFAULT = 0, 100, 3
# Fix-on-red: the rounds a task gets after its candidate fails a required check (0: none).
FIX_ROUNDS_MIN, FIX_ROUNDS_MAX, FIX_ROUNDS_DEFAULT = 0, 20, 2
RECEIPT_RETENTION_MS = 30 * 24 * 3600 * 1000
CANDIDATE_REF_PREFIX = "refs/agent-coordinator/candidates/"
# Every number a request may carry has a range (docs/api.md lists them all).
ID_MAX = 128  # record ids: 1-128 visible ASCII characters
COUNTER_MAX = 2**62  # revisions, generations, event cursors (stored as 64-bit integers)
FINDING_PATH_MAX = 4096  # a finding's file (its line numbers are 1..COUNTER_MAX)
PAGE_LIMIT_MAX = 200
EXIT_CODE_MIN, EXIT_CODE_MAX = -255, 255
STEP_EXIT_MIN, STEP_EXIT_MAX = -(1 << 31), 1 << 32  # a step's exit status, as harnesses report
RunEnding = Literal["submitted", "released", "killed", "limit_hit"]  # how a recorded run ended
RUN_ENDINGS: tuple[RunEnding, ...] = get_args(RunEnding)
TOKENS_MAX = 10**12  # per cost row and token kind
USD_MAX = 10**6  # per cost row
CALLS_MAX = 10**9  # model calls per cost row
ROW_NUMBER_MAX = 2**53  # any other number in a telemetry row (exact in every JSON reader)
JSON_DEPTH_MAX = 32  # nesting of arrays and objects in a request body


class PrincipalKind(StrEnum):
    """Who an account is; a task's origin is the kind of its creator."""

    HUMAN = "human"
    AGENT = "agent"


class PrincipalRole(StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    AGENT = "agent"


class ProjectRole(StrEnum):
    """A principal's role in one project it is granted (admins need no grant: they have every
    project). People are operators (read and change the project's work) or viewers (read
    only); agents hold the agent role, and their credential's access says whether they write."""

    OPERATOR = "operator"
    VIEWER = "viewer"
    AGENT = "agent"


class AdmissionClass(StrEnum):
    CANARY = "canary"


class Hold(StrEnum):
    """Why an agent's task waits, planned, for a person to approve it."""

    APPROVAL = "approval"  # the project does not admit agent-filed tasks by itself
    WEEKLY_BUDGET = "weekly_budget"  # the project's agents filed their week's budget already


class TelemetryStream(StrEnum):
    COST = "cost"
    CANARY = "canary"
