"""The console's pages (reads only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request
from starlette.responses import RedirectResponse, Response

from agentc.core.model import ActivityKind, ActivityState, WorkStatus
from agentc.core.rules import rfc3339
from agentc.service.auth import visible_projects
from agentc.service.console.render import HERE, Viewer, html, page, router
from agentc.service.work import integration, model_policy, steps, tasks
from agentc.service.work.accounts import browser_sessions
from agentc.service.work.views import project_row, project_view, task_detail, task_row
from agentc.store import artifacts, leases
from agentc.store.accounts import all_credentials, all_principals, live_browser_sessions
from agentc.store.audit import events_after
from agentc.store.grants import all_grants
from agentc.store.projects import all_projects
from agentc.store.tx import Tx

STATIC = {"console.css": "text/css", "console.js": "text/javascript"}
EVENTS_SCANNED = 2000
QUEUE_SHOWN = 50  # the landing queue on a project's board


@router.get("/")
async def root() -> Response:
    return RedirectResponse("/console/projects", status_code=303)


@router.get("/favicon.ico")
async def favicon() -> Response:
    return Response(status_code=204)


@router.get("/console")
async def console_root() -> Response:
    return RedirectResponse("/console/projects", status_code=303)


@router.get("/console/static/{name}")
async def static(name: str) -> Response:
    if name not in STATIC:
        return html("problem.html", http_status=404, code="not_found", message="no such file")
    body = (HERE / "static" / name).read_bytes()
    return Response(body, media_type=STATIC[name])


@router.get("/console/sign-in")
async def sign_in_page(request: Request, next: str = "/console/projects") -> Response:
    return html("sign_in.html", next=_local(next), message=None)


def _local(path: str) -> str:
    """Where to go after sign-in: a console path only (never another site)."""
    ok = path.startswith("/console/") and "//" not in path and "\\" not in path
    return path if ok else "/console/projects"


@router.get("/console/projects")
async def projects_page(request: Request) -> Response:
    def build(tx: Tx, v: Viewer) -> tuple[str, dict[str, Any]]:
        shown = visible_projects(tx.conn, v.actor)
        return "projects.html", {"projects": [project_view(p) for p in shown]}

    return await page(request, build)


@router.get("/console/projects/{project_id}")
async def board_page(request: Request, project_id: str, status: str = "") -> Response:
    if status and status not in {s.value for s in WorkStatus}:
        status = ""

    def build(tx: Tx, _v: Viewer) -> tuple[str, dict[str, Any]]:
        project = project_view(project_row(tx.conn, project_id))
        items = tasks.list_tasks(tx.conn, project_id, tx.now, 200, None, status or None)["items"]
        columns = [
            (s.value, [t for t in items if t["work_status"] == s.value])
            for s in WorkStatus
            if not status or s.value == status
        ]
        working = leases.working_tasks(tx.conn, project_id, tx.now)
        queue = integration.landing_queue(tx.conn, project_id, QUEUE_SHOWN)["items"]
        return "board.html", {
            "project": project, "columns": columns, "status": status, "working": working,
            "queue": queue,
        }  # fmt: skip

    return await page(request, build)


@router.get("/console/projects/{project_id}/tasks/new")
async def new_task_page(request: Request, project_id: str) -> Response:
    def build(tx: Tx, _v: Viewer) -> tuple[str, dict[str, Any]]:
        return "new_task.html", {"project": project_view(project_row(tx.conn, project_id))}

    return await page(request, build)


@router.get("/console/projects/{project_id}/tasks/{task_id}")
async def task_page(request: Request, project_id: str, task_id: str) -> Response:
    def build(tx: Tx, _v: Viewer) -> tuple[str, dict[str, Any]]:
        project = project_view(project_row(tx.conn, project_id))
        task = task_detail(tx.conn, task_row(tx.conn, project_id, task_id), tx.now)
        flow = task["workflow"]
        reviewable = [
            a
            for a in flow["activities"]
            if a["kind"] in (ActivityKind.HUMAN_REVIEW, ActivityKind.EITHER_REVIEW)
            and a["state"] == ActivityState.QUEUED
        ]
        return "task.html", {
            "project": project,
            "task": task,
            "reviewable": reviewable,
            "editable": not task["current_attempt_id"]
            and task["lifecycle"] in ("open", "planned")
            and not flow["submission"],
            # blocked (by an agent, or parked) or backing off: a person may put it back
            "puttable": task["lifecycle"] == "open"
            and bool(task["blocked_reason"] or task["parked"] or task["offered_from"]),
            "cancelable": task["lifecycle"] in ("open", "planned")
            and not task["current_attempt_id"]
            and task["phase"] not in ("review", "integration"),
            "events": _task_events(tx, project_id, task),
            "runs": steps.of_task(tx.conn, task_id),
            "working": _working(tx, task),
            "patches": {
                a.submission_id for a in artifacts.of_task(tx.conn, task_id) if a.kind == "patch"
            },
            **_policy(tx, project_id, task_id),
        }

    return await page(request, build)


def _policy(tx: Tx, project_id: str, task_id: str) -> dict[str, Any]:
    """The task's model policy for its page (``model_policy.html``)."""
    shown = model_policy.task_policy(tx, project_id, task_id)
    return {
        "policy_level": shown["task"],
        "policy_effective": shown["effective"],
        "policy_sources": shown["sources"],
    }


def _working(tx: Tx, task: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The task's attempts running now (active, lease live): for each, how long it has run
    and the current step and spend its supervisor last told (with its renewal, the view's
    ``live``), if any."""
    working = {}
    for a in task["attempts"]:
        if a["state"] != "active" or not a.get("lease_remaining_ms"):
            continue
        started = int(datetime.fromisoformat(a["created_at"]).timestamp() * 1000)
        now = a.get("live") or {}
        working[a["id"]] = {
            "elapsed_ms": max(0, tx.now - started),
            "step": now.get("step"),
            "spent_usd": now.get("spent_usd"),
            "spent_tokens": now.get("spent_tokens"),
            "at": now.get("at"),
        }
    return working


def _task_events(tx: Tx, project_id: str, task: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's events (those about the task or its attempts, submissions, activities),
    newest first, from the project's latest events."""
    flow = task["workflow"]
    ids = {task["id"]} | {a["id"] for a in task["attempts"]}
    ids |= {s["id"] for s in flow["submissions"]} | {a["id"] for a in flow["activities"]}
    ids |= {r["id"] for r in flow["reviews"]}
    found: list[dict[str, Any]] = []
    cursor = 0
    for _ in range(EVENTS_SCANNED // 200):
        rows = events_after(tx.conn, project_id, cursor, 200)
        found += [
            {"kind": r.kind, "at": rfc3339(r.created_at), "actor_id": r.actor_id, "seq": r.seq}
            for r in rows
            if r.record_id in ids
        ]
        if len(rows) < 200:
            break
        cursor = rows[-1].seq
    return list(reversed(found))


@router.get("/console/access")
async def access_page(request: Request) -> Response:
    def build(tx: Tx, v: Viewer) -> tuple[str, dict[str, Any]]:
        # Who has an account, and who else may do what, is for admins, who manage them; a
        # person who is not an admin sees their own account only.
        everyone = all_principals(tx.conn)
        shown = everyone if v.is_admin else [p for p in everyone if p.id == v.actor.principal_id]
        live = live_browser_sessions(tx.conn, tx.now)
        return "access.html", {
            "principals": shown,
            "sessions": {p.id: live.get(p.id, 0) for p in shown},
            "session_list": _sessions(tx, v) if v.is_admin else [],
            # Credentials and who reaches which project are for admins, who manage them.
            "credentials": all_credentials(tx.conn) if v.is_admin else [],
            "grants": all_grants(tx.conn) if v.is_admin else {},
            "projects": all_projects(tx.conn) if v.is_admin else [],
        }

    return await page(request, build)


def _sessions(tx: Tx, v: Viewer) -> list[dict[str, Any]]:
    """The live browser sessions the viewer may end (an admin's: everyone's)."""
    items: list[dict[str, Any]] = browser_sessions(tx.conn, tx.now, v.actor, v.session)["items"]
    return items


@router.get("/console/account")
async def account_page(request: Request, changed: str = "") -> Response:
    messages = {
        "1": "The password was changed; your other sessions have ended.",
        "session": "The session was ended.",
    }
    message = messages.get(changed)

    def build(tx: Tx, v: Viewer) -> tuple[str, dict[str, Any]]:
        own = [s for s in _sessions(tx, v) if s["principal_id"] == v.actor.principal_id]
        return "account.html", {"message": message, "session_list": own}

    return await page(request, build)
