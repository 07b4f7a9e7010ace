"""Typed reads of the coordinator's answers that programs act on (the loop, the integrator, `up`).

The service builds these answers in :mod:`agentc.service.work.views` and docs/api.md describes
them. Each read here names the keys its callers use, with their types, as a ``TypedDict``; the
answer is checked once, where it arrives (:func:`shaped`), so the code after it indexes a typed
value instead of guarding every step with ``isinstance``. Keys the shapes do not name are kept
(an answer may grow; what a caller passes on, it passes on whole). An answer of the wrong shape
is one :class:`BadAnswer` naming the read and the first problem, never a ``KeyError`` later.

The agent CLI prints answers as they come: it does not go through these shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NotRequired, TypeVar
from urllib.parse import quote

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from agentc.client.errors import BadAnswer
from agentc.core.model import PAGE_LIMIT_MAX, Role

if TYPE_CHECKING:
    from agentc.client.ops import Agent

_KEEP = ConfigDict(extra="allow")


@with_config(_KEEP)
class Submission(TypedDict):
    id: str
    attempt_id: str | None
    kind: str
    candidate_ref: str | None
    candidate_revision: str | None
    base_revision: str | None
    superseded_at: str | None
    ac_amendment: dict[str, Any] | None


@with_config(_KEEP)
class Activity(TypedDict):
    id: str
    kind: str
    state: str
    submission_id: str | None
    # An integration activity's outcome (absent on a review activity).
    checks: NotRequired[list[dict[str, Any]]]
    sent_back: NotRequired[dict[str, Any] | None]


@with_config(_KEEP)
class Decision(TypedDict):
    submission_id: str | None
    decision: str
    reviewer_kind: str | None
    summary: str
    findings: list[dict[str, Any]]


@with_config(_KEEP)
class Workflow(TypedDict):
    """``GET .../tasks/{id}/workflow``: the current submission, the newest submissions first,
    the task's activities and review decisions."""

    submission: Submission | None
    submissions: list[Submission]
    activities: list[Activity]
    reviews: list[Decision]


@with_config(_KEEP)
class TaskDetail(TypedDict):
    """``GET .../tasks/{id}``: the task with its workflow."""

    id: str
    lifecycle: str
    updated_at: str
    workflow: Workflow


@with_config(_KEEP)
class ClaimedAttempt(TypedDict):
    id: str
    generation: int


@with_config(_KEEP)
class ClaimedTask(TypedDict):
    id: str
    title: str
    acceptance_criteria: list[str]


@with_config(_KEEP)
class Claim(TypedDict):
    """A claim's answer as the loop holds it: the attempt, its task and when to renew."""

    attempt: ClaimedAttempt
    task: ClaimedTask
    renew_after_seconds: NotRequired[float | None]


@with_config(_KEEP)
class ReviewClaim(Claim):
    """``POST .../workflow-activities/{id}/claim``: the claim, with the submission to review."""

    submission: Submission
    # What the implementer's launch did besides its diff (None: not recorded).
    launch_log: dict[str, Any] | None


@with_config(_KEEP)
class TaskClaim(TypedDict):
    """``POST .../claims``: the claim, and when to renew it."""

    claim: Claim
    renew_after_seconds: float


@with_config(_KEEP)
class TaskSummary(TypedDict):
    """A task as the task list shows it."""

    id: str
    work_status: str


@with_config(_KEEP)
class TaskPage(TypedDict):
    """``GET .../tasks``: one page, and the cursor of the next (None: the last)."""

    items: list[TaskSummary]
    next_cursor: str | None


@with_config(_KEEP)
class Action(TypedDict):
    """What ``next`` offers: its kind and the ids it names (the rest kept as sent)."""

    kind: str
    task_id: str
    task_revision: NotRequired[int]
    activity_id: NotRequired[str]
    submission_id: NotRequired[str]


@with_config(_KEEP)
class Offer(TypedDict):
    action: Action | None


@with_config(_KEEP)
class AttemptState(TypedDict):
    state: str


@with_config(_KEEP)
class AttemptDetail(TypedDict):
    attempt: AttemptState


@with_config(_KEEP)
class ModelPolicy(TypedDict):
    effective: dict[str, Any] | None


@with_config(_KEEP)
class Project(TypedDict):
    id: str
    repository_url: str | None


Shape = TypeVar("Shape")
_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def shaped(shape: type[Shape], answer: Any, what: str) -> Shape:
    """``answer`` checked against ``shape`` (types strict: a number is not text); else
    :class:`BadAnswer` naming ``what`` was read and the first problem found."""
    adapter = _ADAPTERS.get(shape)
    if adapter is None:
        adapter = _ADAPTERS[shape] = TypeAdapter(shape)
    try:
        checked: Shape = adapter.validate_python(answer, strict=True)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "the answer"
        raise BadAnswer(f"the coordinator's {what}: {where}: {error['msg']}") from None
    return checked


def workflow(client: Agent, task_id: str) -> Workflow:
    """The task's workflow view."""
    answer = client.get(client.project(f"/tasks/{task_id}/workflow"))
    return shaped(Workflow, answer, f"workflow of task {task_id}")


def offered(client: Agent, kinds: tuple[str, ...], role: Role = Role.IMPLEMENTER) -> Action | None:
    """What ``next`` offers the role when it is of one of ``kinds`` (None: nothing, or an
    offer of another kind)."""
    action = shaped(Offer, client.next(role), f"next ({role})")["action"]
    return action if action is not None and action["kind"] in kinds else None


def attempt_state(client: Agent, attempt_id: str) -> str:
    """The attempt's state (``active``, ``released``, ...)."""
    answer = client.get(client.project(f"/attempts/{attempt_id}"))
    return shaped(AttemptDetail, answer, f"attempt {attempt_id}")["attempt"]["state"]


def model_policy(client: Agent, task_id: str) -> dict[str, Any] | None:
    """The task's effective model policy, as sent (None: none)."""
    answer = client.get(client.project(f"/tasks/{task_id}/model-policy"))
    return shaped(ModelPolicy, answer, f"model policy of task {task_id}")["effective"]


def project(client: Agent) -> Project:
    """The client's project."""
    return shaped(Project, client.get(client.project()), "project")


def tasks(get: Callable[[str], Any], query: str = "") -> Iterator[TaskSummary]:
    """Every task of a project's task list, page after page: ``get`` reads a path below the
    project's (:meth:`agentc.client.project.ProjectApi.get`), ``query`` narrows the list
    (``&work_status=ready``)."""
    cursor = ""
    while True:
        page = shaped(TaskPage, get(f"/tasks?limit={PAGE_LIMIT_MAX}{query}{cursor}"), "task list")
        yield from page["items"]
        if not page["next_cursor"]:
            return
        cursor = f"&cursor={quote(page['next_cursor'], safe='')}"
