"""Request bodies. Unknown fields are refused and types are strict, so a wrong field or type
is a 4xx that names it, never a guess."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agentc.core import model as m

Text = Annotated[str, StringConstraints(max_length=8192)]
Name = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.@-]+$")
]
Criterion = Annotated[str, StringConstraints(min_length=1, max_length=2048)]
Revision = Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")]
Id = Annotated[str, StringConstraints(min_length=1, max_length=64)]
ReviewMode = Literal["none", "agent", "human", "both", "either"]
# Revisions and generations are counters the database stores as 64-bit integers.
Counter = Annotated[int, Field(ge=0, le=2**62)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class LoginIn(Body):
    username: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class AgentIn(Body):
    name: Name
    credential_class: Literal["interactive", "supervised", "integrator"] = "interactive"
    access: Literal["write", "read"] = "write"


class SessionIn(Body):
    session_id: (
        Annotated[
            str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._-]+$")
        ]
        | None
    ) = None
    harness: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    workstation_id: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    capabilities: Annotated[
        list[Annotated[str, StringConstraints(max_length=128)]], Field(max_length=64)
    ] = []


class RequiredCheck(Body):
    identity: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    version: Annotated[str, StringConstraints(min_length=1, max_length=200)] = "1"
    environment: Annotated[str, StringConstraints(min_length=1, max_length=200)] = "default"


class ProjectIn(Body):
    name: Annotated[str, StringConstraints(min_length=1, max_length=120)]
    repository_url: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    target_branch: Annotated[
        str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s-][^\s]*$")
    ] = "main"
    review_mode: ReviewMode = "agent"
    lease_seconds: Annotated[int, Field(ge=m.LEASE_SECONDS_MIN, le=m.LEASE_SECONDS_MAX)] = (
        m.LEASE_SECONDS_DEFAULT
    )
    max_attempt_seconds: Annotated[int, Field(ge=0, le=m.MAX_ATTEMPT_SECONDS_MAX)] = 0
    required_checks: Annotated[list[RequiredCheck], Field(max_length=100)] = []


class PolicyIn(Body):
    expected_revision: Counter
    repository_url: Annotated[str, StringConstraints(min_length=1, max_length=2048)] | None = None
    target_branch: (
        Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s-][^\s]*$")]
        | None
    ) = None
    review_mode: ReviewMode | None = None
    lease_seconds: Annotated[int, Field(ge=m.LEASE_SECONDS_MIN, le=m.LEASE_SECONDS_MAX)] | None = (
        None
    )
    max_attempt_seconds: Annotated[int, Field(ge=0, le=m.MAX_ATTEMPT_SECONDS_MAX)] | None = None
    required_checks: Annotated[list[RequiredCheck], Field(max_length=100)] | None = None


Criteria = Annotated[list[Criterion], Field(min_length=m.CRITERIA_MIN, max_length=m.CRITERIA_MAX)]
Priority = Annotated[int, Field(ge=m.PRIORITY_URGENT, le=m.PRIORITY_LOW)]


class TaskIn(Body):
    title: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    description: Annotated[str, StringConstraints(max_length=32768)] = ""
    acceptance_criteria: Criteria
    kind: Literal["code", "general"] = "code"
    priority: Priority = m.PRIORITY_DEFAULT
    depends_on: Annotated[list[Id], Field(max_length=m.DEPENDENCIES_MAX)] = []
    planned: bool = False
    admission_class: Literal["canary"] | None = None


class TaskEditIn(Body):
    expected_revision: Counter
    title: Annotated[str, StringConstraints(min_length=1, max_length=300)] | None = None
    description: Annotated[str, StringConstraints(max_length=32768)] | None = None
    acceptance_criteria: Criteria | None = None
    priority: Priority | None = None
    depends_on: Annotated[list[Id], Field(max_length=m.DEPENDENCIES_MAX)] | None = None
    planned: bool | None = None


class CancelIn(Body):
    expected_revision: Counter
    reason: Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class ClaimIn(Body):
    task_id: Id | None = None
    expected_task_revision: Counter | None = None


class GenerationIn(Body):
    generation: Counter


class CheckpointIn(Body):
    generation: Counter
    summary: Annotated[str, StringConstraints(min_length=1, max_length=8192)]
    handoff: Annotated[str, StringConstraints(max_length=16384)] | None = None
    current_action: Annotated[str, StringConstraints(max_length=4096)] | None = None
    next_step: Annotated[str, StringConstraints(max_length=4096)] | None = None
    revision: Revision | None = None


class ReleaseIn(Body):
    generation: Counter
    handoff: Annotated[str, StringConstraints(min_length=1, max_length=16384)]
    blocked: bool = False


class Evidence(Body):
    criterion: Criterion
    evidence: Annotated[str, StringConstraints(min_length=1, max_length=8192)]


class Amendment(Body):
    new: Criteria
    rationale: Annotated[str, StringConstraints(min_length=1, max_length=8192)]


class SubmissionIn(Body):
    generation: Counter
    kind: Literal["code", "general"]
    summary: Annotated[str, StringConstraints(min_length=1, max_length=8192)]
    acceptance_evidence: Annotated[list[Evidence], Field(min_length=1, max_length=100)]
    handoff: Annotated[str, StringConstraints(max_length=16384)] = ""
    candidate_ref: Annotated[str, StringConstraints(max_length=512)] | None = None
    candidate_revision: Revision | None = None
    base_revision: Revision | None = None
    ac_amendment: Amendment | None = None


class ActivityClaimIn(Body):
    expected_submission_id: Id


class Finding(Body):
    severity: Literal["required", "advisory"]
    remedy: Annotated[str, StringConstraints(min_length=1, max_length=8192)]
    evidence: Annotated[str, StringConstraints(max_length=8192)] = ""


class ReviewIn(Body):
    generation: Counter | None = None
    submission_id: Id
    decision: Literal["approved", "changes_requested"]
    summary: Annotated[str, StringConstraints(min_length=1, max_length=16384)]
    findings: Annotated[list[Finding], Field(max_length=100)] = []
    amendment_decision: Literal["accepted", "rejected"] | None = None


class ActivityReleaseIn(Body):
    generation: Counter
    summary: Annotated[str, StringConstraints(min_length=1, max_length=8192)]


class LandingIn(Body):
    submission_id: Id
    landed_revision: Revision


class TelemetryIn(Body):
    host: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    rows: Annotated[list[dict[str, object]], Field(min_length=1, max_length=1000)]


class UnblockIn(Body):
    expected_revision: Counter
    reason: Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class CheckoutIn(Body):
    generation: Counter
    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    branch: Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s]+$")]
    base_revision: Revision
    workstation_id: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
