"""The console's model policy (decision D47): shown on the project's settings page and on each
task's page, changed by admins through the same mutation as ``PUT .../model-policy``.

A form field left empty is not set at that level (a task then takes the project's value; a
project sets no limit); the allowed models are one pattern a line. An empty list of models
(no model at all) is the API's alone.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import Request
from starlette.datastructures import FormData
from starlette.responses import Response

from agentc.service.console.forms import _field, _form, _lines, _model, _number, _write_then_go
from agentc.service.work import model_policy
from agentc.service.work.model_policy import ModelPolicyIn

LABELS = {
    "allowed_models": "Allowed models",
    "max_output_tokens": "Output tokens per call",
    "max_turns": "Model turns per attempt",
    "max_usd": "Dollars per attempt",
}


def _whole(text: str) -> int | str | None:
    return _number(text) if text.strip() else None


def _dollars(text: str) -> float | str | None:
    """A form's dollars; anything else stays text, for the schema to name the field."""
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _body(form: FormData) -> ModelPolicyIn:
    models = _lines(_field(form, "allowed_models"))
    fields: dict[str, Any] = {
        "expected_revision": _number(_field(form, "expected_revision")),
        "allowed_models": models or None,
        "max_output_tokens": _whole(_field(form, "max_output_tokens")),
        "max_turns": _whole(_field(form, "max_turns")),
        "max_usd": _dollars(_field(form, "max_usd")),
    }
    body = _model(lambda: ModelPolicyIn.model_validate(fields))
    assert isinstance(body, ModelPolicyIn)
    return body


@_form("/console/projects/{project_id}/model-policy")
async def project_policy_form(request: Request, form: FormData, project_id: str) -> Response:
    path = f"/console/projects/{quote(project_id, safe='')}/settings?saved=model-policy"
    return await _write_then_go(
        request,
        form,
        path,
        lambda op, b: model_policy.set_project_policy(op, project_id, b),
        _body(form),
    )


@_form("/console/projects/{project_id}/model-policy/tasks/{task_id}")
async def task_policy_form(
    request: Request, form: FormData, project_id: str, task_id: str
) -> Response:
    path = f"/console/projects/{quote(project_id, safe='')}/tasks/{quote(task_id, safe='')}"
    return await _write_then_go(
        request,
        form,
        path + "#model-policy",
        lambda op, b: model_policy.set_task_policy(op, project_id, task_id, b),
        _body(form),
    )
