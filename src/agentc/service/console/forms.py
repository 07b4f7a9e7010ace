"""The console's writes. Each runs as an API mutation (the same authentication, Origin, CSRF,
Idempotency-Key, receipt and audit as the API); the form carries the CSRF token and the key."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from fastapi import Request
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from agentc.core.browser import cookie_name
from agentc.core.errors import CoordinatorError
from agentc.core.model import PRIORITY_DEFAULT, PrincipalRole
from agentc.core.rules import check_idempotency_key, whole_number
from agentc.service.api import (
    authorized,
    hidden_project,
    mutation,
    operation_of,
    presented,
    project_of,
    runtime_of,
)
from agentc.service.auth import Presented, hash_password, require_admin
from agentc.service.console.pages import _local
from agentc.service.console.render import html, invalid_form, problem, router
from agentc.service.ops import JsonObject, Op, Result
from agentc.service.routes_access import PersonIn, change_password, sign_out
from agentc.service.schemas import (
    AgentIn,
    ApproveIn,
    CancelIn,
    GrantIn,
    PolicyIn,
    ProjectIn,
    ReviewIn,
    TaskEditIn,
    TaskIn,
    UnblockIn,
)
from agentc.service.signin import (
    check_origin,
    client_of,
    set_device_cookie,
    set_session_cookie,
    sign_in,
)
from agentc.service.work import accounts, grants, projects, reviews, tasks

Fn = Callable[[Op, Any], Result]
ACCESS = "/console/access"


async def run_write(request: Request, form: FormData, body: BaseModel | None, fn: Fn) -> JsonObject:
    """One console write as an API mutation: cookie + Origin + the form's CSRF token."""
    rt = runtime_of(request)
    creds = _credentials(request, form)
    if creds.bearer is not None or creds.cookie is None:
        raise CoordinatorError("authentication_required", "sign in first", status=401)
    key = check_idempotency_key(_field(form, "idempotency_key") or None)
    work = mutation(rt, creds, operation_of(request), key, body, fn, project_id=project_of(request))
    _status, out, _replayed = await rt.executor.write_async(work)
    data: JsonObject = json.loads(out)["data"]
    return data


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _model(make: Callable[[], BaseModel]) -> BaseModel:
    try:
        return make()
    except ValidationError as exc:
        raise invalid_form(exc) from None


FormHandler = Callable[..., Awaitable[Response]]


def _form(path: str) -> Callable[[FormHandler], FormHandler]:
    """Register ``handler(request, form, **path_parameters)`` as the form posted to ``path``.

    A refusal becomes a page that says what and why. A form about a project the person may not
    reach is refused before the form is read, as the API does."""

    def register(handler: FormHandler) -> FormHandler:
        async def endpoint(request: Request) -> Response:
            hidden = await hidden_project(request)
            if hidden is not None:
                return problem(hidden)
            try:
                form = await request.form()
                response: Response = await handler(request, form, **request.path_params)
                return response
            except CoordinatorError as err:
                return problem(err)

        router.add_api_route(path, endpoint, methods=["POST"], name=handler.__name__)
        return handler

    return register


def _credentials(request: Request, form: FormData) -> Presented:
    """The credentials the request carried, with the form's CSRF token."""
    return dataclasses.replace(presented(request), csrf=_field(form, "csrf"))


def _go(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


async def _write_then_go(
    request: Request, form: FormData, path: str, fn: Fn, body: BaseModel | None = None
) -> Response:
    """One console write (``fn``, given the form's ``body`` if it has one), then the page at
    ``path``."""
    await run_write(request, form, body, fn)
    return _go(path)


@_form("/console/sign-in")
async def sign_in_form(request: Request, form: FormData) -> Response:
    rt = runtime_of(request)
    check_origin(rt, request, "sign-in")
    username, password = _field(form, "username"), _field(form, "password")
    try:
        done = await sign_in(rt, username, password, client_of(rt, request))
    except CoordinatorError as err:
        if err.status not in (401, 429):
            raise
        nxt = _local(_field(form, "next"))
        return html("sign_in.html", http_status=err.status, next=nxt, message=err.message)
    resp = _go(_local(_field(form, "next")))
    set_session_cookie(rt, resp, done.cookie)
    set_device_cookie(rt, resp, done.device_cookie)  # this browser's own lane from now on
    return resp


@_form("/console/sign-out")
async def sign_out_form(request: Request, form: FormData) -> Response:
    rt = runtime_of(request)
    await sign_out(rt, _credentials(request, form))
    resp = _go("/console/sign-in")
    resp.delete_cookie(cookie_name(rt.settings.https))
    return resp


@_form("/console/account/password")
async def password_form(request: Request, form: FormData) -> Response:
    rt = runtime_of(request)
    new = _field(form, "new_password")
    if new != _field(form, "confirm_password"):
        raise CoordinatorError("invalid_input", "the new passwords differ", status=422)
    current = _field(form, "current_password")
    await change_password(rt, _credentials(request, form), current, new, client_of(rt, request))
    return _go("/console/account?changed=1")


@_form("/console/projects")
async def project_form(request: Request, form: FormData) -> Response:
    body = _model(
        lambda: ProjectIn(
            name=_field(form, "name"),
            repository_url=_field(form, "repository_url"),
            target_branch=_field(form, "target_branch") or "main",
            review_mode=_field(form, "review_mode") or "agent",  # type: ignore[arg-type]
        )
    )
    data = await run_write(request, form, body, projects.create_project)
    return _go(f"/console/projects/{quote(data['id'])}")


@_form("/console/projects/{project_id}/tasks")
async def task_form(request: Request, form: FormData, project_id: str) -> Response:
    priority = _field(form, "priority")
    body = _model(
        lambda: TaskIn(
            title=_field(form, "title"),
            description=_field(form, "description"),
            acceptance_criteria=_lines(_field(form, "acceptance_criteria")),
            priority=_or(whole_number(priority), PRIORITY_DEFAULT),
            depends_on=_field(form, "depends_on").replace(",", " ").split(),
            kind=_field(form, "kind") or "general",  # type: ignore[arg-type]
        )
    )
    data = await run_write(request, form, body, lambda op, b: tasks.create_task(op, project_id, b))
    return _go(f"/console/projects/{quote(project_id)}/tasks/{quote(data['task']['id'])}")


@_form("/console/projects/{project_id}/tasks/{task_id}/edit")
async def edit_form(request: Request, form: FormData, project_id: str, task_id: str) -> Response:
    revision, priority = _field(form, "expected_revision"), _field(form, "priority")
    body = _model(
        lambda: TaskEditIn(
            expected_revision=_or(whole_number(revision), -1),
            title=_field(form, "title"),
            description=_field(form, "description"),
            acceptance_criteria=_lines(_field(form, "acceptance_criteria")),
            priority=_or(whole_number(priority), PRIORITY_DEFAULT),
            depends_on=_field(form, "depends_on").replace(",", " ").split(),
        )
    )
    return await _write_then_go(
        request,
        form,
        _task_page(project_id, task_id),
        lambda op, b: tasks.edit_task(op, project_id, task_id, b),
        body,
    )


def _task_page(project_id: str, task_id: str) -> str:
    return f"/console/projects/{quote(project_id, safe='')}/tasks/{quote(task_id, safe='')}"


# The task page's other forms: a person approves a proposed task, cancels a task, or puts a
# blocked, parked or backing-off task back (each the API's operation of the same name).
TaskOperation = Callable[[Op, str, str, Any], Result]
_TASK_ACTIONS: dict[str, tuple[type[BaseModel], TaskOperation]] = {
    "approve": (ApproveIn, tasks.approve_task),
    "cancel": (CancelIn, tasks.cancel_task),
    "unblock": (UnblockIn, tasks.unblock_task),
}


@_form("/console/projects/{project_id}/tasks/{task_id}/{action}")
async def task_action_form(
    request: Request, form: FormData, project_id: str, task_id: str, action: str
) -> Response:
    if action not in _TASK_ACTIONS:
        raise CoordinatorError("record_not_found", "no such action", status=404)
    model, operation = _TASK_ACTIONS[action]
    fields: dict[str, Any] = {"expected_revision": _number(_field(form, "expected_revision"))}
    if "reason" in model.model_fields:
        fields["reason"] = _field(form, "reason")
    body = _model(lambda: model.model_validate(fields))
    return await _write_then_go(
        request,
        form,
        _task_page(project_id, task_id),
        lambda op, b: operation(op, project_id, task_id, b),
        body,
    )


@_form("/console/projects/{project_id}/activities/{activity_id}/review")
async def review_form(
    request: Request, form: FormData, project_id: str, activity_id: str
) -> Response:
    fields: dict[str, Any] = {
        "submission_id": _field(form, "submission_id"),
        "decision": _field(form, "decision"),
        "summary": _field(form, "summary"),
        "findings": _findings(form),
    }
    if _field(form, "amendment_decision"):
        fields["amendment_decision"] = _field(form, "amendment_decision")
    body = _model(lambda: ReviewIn.model_validate(fields))
    await run_write(
        request, form, body, lambda op, b: reviews.decide(op, project_id, activity_id, b)
    )
    task = _task_page(project_id, _field(form, "task_id"))
    if _field(form, "from") == "change":  # back to the change, named by the ids it posted
        return _go(f"{task}/submissions/{quote(fields['submission_id'], safe='')}")
    return _go(task)


def _findings(form: FormData) -> list[dict[str, Any]]:
    """The form's findings, one per non-blank remedy: its severity and evidence, and for a
    line comment its file and lines (the i-th of each field belongs to the i-th remedy)."""
    columns = {k: form.getlist(k) for k in ("severity", "evidence", "path", "line", "end_line")}
    found = []
    for i, remedy in enumerate(form.getlist("remedy")):
        if not isinstance(remedy, str) or not remedy.strip():
            continue
        at: dict[str, str] = {}
        for key, values in columns.items():
            value = values[i] if i < len(values) else None
            if isinstance(value, str):
                at[key] = value
        finding: dict[str, Any] = {
            "severity": at.get("severity", "required"),
            "remedy": remedy,
            "evidence": at.get("evidence", ""),
        }
        if at.get("path"):
            finding["path"] = at["path"]
        for key in ("line", "end_line"):
            if at.get(key, "").strip():
                finding[key] = _number(at[key])
        found.append(finding)
    return found


@_form("/console/access/people")
async def person_form(request: Request, form: FormData) -> Response:
    fields = {"name": _field(form, "name"), "role": _field(form, "role") or "operator"}
    body = _model(lambda: PersonIn.model_validate(fields))
    assert isinstance(body, PersonIn)
    if body.role not in (PrincipalRole.ADMIN, PrincipalRole.OPERATOR):
        raise CoordinatorError("invalid_input", "role: admin or operator", status=422)
    creds = _credentials(request, form)
    if creds.bearer is not None or creds.cookie is None:
        raise CoordinatorError("authentication_required", "sign in first", status=401)
    await authorized(
        runtime_of(request),
        creds,
        operation_of(request),
        lambda actor: require_admin(actor, "add people"),
    )
    password_hash = await run_in_threadpool(hash_password, _field(form, "password"))
    role = body.role
    return await _write_then_go(
        request,
        form,
        ACCESS,
        lambda op, b: accounts.add_person(op, b.name, role, password_hash),
        body,
    )


@_form("/console/access/agents")
async def issue_form(request: Request, form: FormData) -> Response:
    body = _model(
        lambda: AgentIn.model_validate(
            {
                "name": _field(form, "name"),
                "credential_name": _field(form, "credential_name") or "initial",
                "credential_class": _field(form, "credential_class") or "interactive",
                "access": _field(form, "access") or "write",
                "projects": [p for p in form.getlist("projects") if isinstance(p, str)],
            }
        )
    )
    data = await run_write(request, form, body, accounts.admin_issue)
    return html("revealed.html", data=data)


@_form("/console/access/credentials/{credential_id}/rotate")
async def rotate_form(request: Request, form: FormData, credential_id: str) -> Response:
    data = await run_write(
        request, form, None, lambda op, _b: accounts.rotate_credential(op, credential_id)
    )
    return html("revealed.html", data=data)


@_form("/console/access/credentials/{credential_id}/revoke")
async def revoke_form(request: Request, form: FormData, credential_id: str) -> Response:
    return await _write_then_go(
        request, form, ACCESS, lambda op, _b: accounts.revoke_credential(op, credential_id)
    )


@_form("/console/access/principals/{principal_id}/projects/grant")
async def grant_form(request: Request, form: FormData, principal_id: str) -> Response:
    fields = {"project_id": _field(form, "project_id"), "role": _field(form, "role") or None}
    body = _model(lambda: GrantIn.model_validate(fields))
    return await _write_then_go(
        request, form, ACCESS, lambda op, b: grants.grant_project(op, principal_id, b), body
    )


@_form("/console/access/principals/{principal_id}/projects/{project_id}/revoke")
async def revoke_grant_form(
    request: Request, form: FormData, principal_id: str, project_id: str
) -> Response:
    return await _write_then_go(
        request, form, ACCESS, lambda op, _b: grants.revoke_project(op, principal_id, project_id)
    )


@_form("/console/access/principals/{principal_id}/{action}")
async def account_state_form(
    request: Request, form: FormData, principal_id: str, action: str
) -> Response:
    if action not in ("disable", "enable"):
        raise CoordinatorError("record_not_found", "no such action", status=404)
    disabled = action == "disable"
    return await _write_then_go(
        request, form, ACCESS, lambda op, _b: accounts.set_disabled(op, principal_id, disabled)
    )


def _number(text: str) -> int | str:
    """A form's whole number; anything else stays text, for the schema to name the field."""
    number = whole_number(text)
    return text if number is None else number


def _or(number: int | None, default: int) -> int:
    return default if number is None else number


def _checks(text: str) -> list[dict[str, str]]:
    """Required checks, one a line: `identity` or `identity, version[, environment]`."""
    checks = []
    for n, line in enumerate(_lines(text), start=1):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) > 3 or not all(parts):
            raise CoordinatorError(
                "invalid_input",
                f"required_checks: line {n}: a name, or name, version, environment",
                status=422,
            )
        checks.append(dict(zip(("identity", "version", "environment"), parts, strict=False)))
    return checks


@_form("/console/projects/{project_id}/settings")
async def settings_form(request: Request, form: FormData, project_id: str) -> Response:
    fields = {
        "expected_revision": _number(_field(form, "expected_revision")),
        "repository_url": _field(form, "repository_url"),
        "target_branch": _field(form, "target_branch"),
        "review_mode": _field(form, "review_mode"),
        "lease_seconds": _number(_field(form, "lease_seconds")),
        "max_attempt_seconds": _number(_field(form, "max_attempt_seconds")),
        "required_checks": _checks(_field(form, "required_checks")),
        "admit_agent_tasks": _field(form, "admit_agent_tasks") == "on",
        "park_after_attempts": _number(_field(form, "park_after_attempts")),
    }
    body = _model(lambda: PolicyIn.model_validate(fields))
    path = f"/console/projects/{quote(project_id, safe='')}/settings?saved=1"
    return await _write_then_go(
        request, form, path, lambda op, b: projects.update_policy(op, project_id, b), body
    )


@_form("/console/sessions/{session_id}/end")
async def end_session_form(request: Request, form: FormData, session_id: str) -> Response:
    await run_write(
        request, form, None, lambda op, _b: accounts.end_browser_session(op, session_id)
    )
    back = _field(form, "back") == "access"
    return _go(ACCESS if back else "/console/account?changed=session")
