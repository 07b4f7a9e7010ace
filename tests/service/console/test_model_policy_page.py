"""The model policy in the console (issue 30): the project's on its settings page, a task's
(effective, with where each value comes from) on the task's page, changed by admins only
through forms that follow every console write's rules."""

from __future__ import annotations

import html
import re

from tests.service.console.kit import browse_as, form_of, post_form
from tests.service.kit import Service


def _text(page: str) -> str:
    """The page's text: tags dropped, entities read, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_an_admin_sets_the_project_and_task_policy_from_the_console(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    settings = f"/console/projects/{pid}/settings"
    task_page = f"/console/projects/{pid}/tasks/{task['id']}"
    browse_as(svc, svc.admin)
    page = svc.client.get(settings).text
    assert 'id="model-policy-facts"' in page and "Change the model policy" in page
    assert "Allowed models any Output tokens per call no limit" in _text(page)
    form = {
        **form_of(svc, settings),
        "expected_revision": "0",
        "allowed_models": "claude-*\n\n gpt-5 \n",
        "max_output_tokens": "8192",
        "max_turns": "",
        "max_usd": "",
    }
    done = post_form(svc, f"/console/projects/{pid}/model-policy", form)
    assert done.status_code == 303, done.text
    assert done.headers["location"] == settings + "?saved=model-policy"
    page = svc.client.get(done.headers["location"]).text
    assert "The model policy was saved." in page
    assert "<code>claude-*</code>, <code>gpt-5</code>" in page and "at most 8,192" in page
    api = svc.admin.get(f"/api/v1/projects/{pid}/model-policy")
    assert api["policy"] == {
        "allowed_models": ["claude-*", "gpt-5"],
        "max_output_tokens": 8192,
        "max_turns": None,
        "max_usd": None,
    }
    # The task: its own turns and dollars, the project's models.
    browse_as(svc, svc.admin)
    form = {
        **form_of(svc, task_page),
        "expected_revision": "0",
        "allowed_models": "",
        "max_output_tokens": "",
        "max_turns": "12",
        "max_usd": "2.5",
    }
    done = post_form(svc, f"/console/projects/{pid}/model-policy/tasks/{task['id']}", form)
    assert done.status_code == 303 and done.headers["location"] == task_page + "#model-policy"
    page = _text(svc.client.get(task_page).text)
    assert "Allowed models claude-* , gpt-5 (the project's)" in page
    assert "Output tokens per call at most 8,192 (the project's)" in page
    assert "at most 12 (the task's)" in page and "at most $2.5 (the task's)" in page
    effective = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}/model-policy")
    assert effective["effective"]["max_turns"] == 12 and effective["effective"]["max_usd"] == 2.5


def test_bad_values_and_stale_forms_are_refused_naming_why(svc: Service) -> None:
    pid = svc.project()
    settings = f"/console/projects/{pid}/settings"
    action = f"/console/projects/{pid}/model-policy"
    browse_as(svc, svc.admin)
    base = {"expected_revision": "0", "allowed_models": "", "max_turns": "", "max_usd": ""}
    for field, value in (
        ("allowed_models", "claude sonnet"),
        ("max_output_tokens", "0"),
        ("max_turns", "ten"),
        ("max_usd", "free"),
    ):
        sent = {**form_of(svc, settings), **base, "max_output_tokens": "", field: value}
        refused = post_form(svc, action, sent)
        assert refused.status_code == 422, (field, refused.text)
        assert field in refused.text
    ok = {**form_of(svc, settings), **base, "max_output_tokens": "100"}
    assert post_form(svc, action, ok).status_code == 303
    stale = post_form(svc, action, {**form_of(svc, settings), **base, "max_output_tokens": "9"})
    assert stale.status_code == 409 and "revision" in stale.text
    stored = svc.admin.get(f"/api/v1/projects/{pid}/model-policy")
    assert stored["policy"]["max_output_tokens"] == 100


def test_only_admins_see_and_use_the_form(svc: Service) -> None:
    pid = svc.project()
    task = svc.task(pid)
    task_page = f"/console/projects/{pid}/tasks/{task['id']}"
    olga = svc.person(pid)  # an operator of the project
    browse_as(svc, olga)
    page = svc.client.get(task_page).text
    assert 'id="model-policy-facts"' in page and 'id="model-policy-form"' not in page
    form = {
        **form_of(svc, task_page),
        "expected_revision": "0",
        "allowed_models": "*",
        "max_output_tokens": "",
        "max_turns": "",
        "max_usd": "1000",
    }
    task_form = f"/console/projects/{pid}/model-policy/tasks/{task['id']}"
    for path in (task_form, f"/console/projects/{pid}/model-policy"):
        refused = post_form(svc, path, form)
        assert refused.status_code == 403 and "admin" in refused.text
        assert post_form(svc, path, {**form, "csrf": ""}).status_code == 403
    effective = svc.admin.get(f"/api/v1/projects/{pid}/tasks/{task['id']}/model-policy")
    assert effective["task"]["revision"] == 0 and effective["project"]["revision"] == 0
