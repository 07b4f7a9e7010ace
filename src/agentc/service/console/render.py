"""The console's router, templates and the helpers every page and form shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse, Response

from agentc.core.errors import CoordinatorError
from agentc.core.model import RunEnding, WorkStatus
from agentc.service.api import presented, project_of, runtime_of
from agentc.service.auth import Actor, authenticate, csrf_token, verifier
from agentc.service.ops import new_id
from agentc.service.request import ApiRoute
from agentc.store.tx import Tx

router = APIRouter(include_in_schema=False, route_class=ApiRoute)
HERE = Path(__file__).parent
_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.globals["new_key"] = new_id
_env.globals["statuses"] = [s.value for s in WorkStatus]
# Who reviews, in words (the review mode's name is the API's, shown only as the form's value).
_env.globals["who_reviews"] = {
    "none": "nobody (no review)",
    "agent": "an agent",
    "human": "a person",
    "both": "an agent and a person",
    "either": "an agent or a person, whoever takes it first",
}

ENDING_WORDS: dict[RunEnding, str] = {
    "submitted": "submitted",
    "released": "released",
    "killed": "stopped by the supervisor",
    "limit_hit": "hit a limit",
}
_env.globals["endings"] = ENDING_WORDS


def duration(ms: object) -> str:
    """A duration in words: ``1 h 02 min``, ``3 min 05 s``, ``12 s``."""
    seconds = int(ms) // 1000 if isinstance(ms, int) and ms > 0 else 0
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


_env.filters["duration"] = duration


@dataclass(frozen=True)
class Viewer:
    """The signed-in person viewing a page, the CSRF token their forms carry, and the
    verifier of their session (to tell it apart in a list of sessions)."""

    actor: Actor
    csrf: str
    session: str

    @property
    def is_admin(self) -> bool:
        return self.actor.role == "admin"


def html(template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    body = _env.get_template(template).render(**context)
    return HTMLResponse(body, status_code=http_status)


def viewer_of(tx: Tx, request: Request) -> Viewer | None:
    """The signed-in person, or None (no cookie, a bearer token, or a dead session). A page
    about a project the person is not granted is refused (404) as the API refuses it."""
    creds = presented(request)
    if creds.cookie is None or creds.bearer is not None:
        return None
    origin = runtime_of(request).settings.public_origin
    try:
        project_id = project_of(request)
        actor = authenticate(
            tx.conn, creds, tx.now, write=False, public_origin=origin, project_id=project_id
        )
    except CoordinatorError as err:
        if err.status != 401:
            raise
        return None
    if not actor.is_human:
        return None
    return Viewer(actor, csrf_token(creds.cookie), verifier(creds.cookie))


def to_sign_in(request: Request) -> RedirectResponse:
    return RedirectResponse("/console/sign-in?next=" + quote(request.url.path), status_code=303)


Build = Callable[[Tx, Viewer], tuple[str, dict[str, Any]]]


async def page(request: Request, build: Build) -> Response:
    """A page for a signed-in person, read in one transaction; others go to sign-in."""
    rt = runtime_of(request)

    def work(tx: Tx) -> tuple[str, dict[str, Any]] | None:
        viewer = viewer_of(tx, request)
        if viewer is None:
            return None
        template, context = build(tx, viewer)
        return template, {**context, "viewer": viewer, "now": tx.now}

    try:
        built = await run_in_threadpool(rt.executor.read, work)
    except CoordinatorError as err:
        return problem(err)
    if built is None:
        return to_sign_in(request)
    return html(built[0], **built[1])


def problem(err: CoordinatorError) -> HTMLResponse:
    """A refusal as a page: what was refused and why, never a traceback."""
    return html("problem.html", http_status=err.status, code=err.code, message=err.message)


def invalid_form(exc: ValidationError) -> CoordinatorError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "form"
    return CoordinatorError("invalid_input", f"{where}: {first.get('msg', 'invalid')}", status=422)
