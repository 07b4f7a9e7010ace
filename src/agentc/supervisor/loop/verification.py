"""Verifying reviewers: the loop signs in to a staging coordinator for the reviewer's launch.

A project with a ``[verification.<project-id>]`` table has verifying reviews. Before such a
reviewer's harness starts, the loop (never the candidate) reads the login
(``login_file``: ``{"username", "password"}`` of a person on the staging coordinator, the
loop's own file, mode 0600), signs in (``POST /api/v1/auth/login`` with ``Origin``; redirects
never followed) and writes, create-new and mode 0600, ``$RUN/verification.json``
(``{project_id, url, session_file, browser}``) and ``$RUN/verification-session.json``
(``{url, cookie: {name, value}}``). Both are read-only inside the launch and come back into
each candidate command's sandbox; the login never does: it is never copied, and its directory
is an empty tmpfs in the launch. A loopback staging is relayed into the launch's network
namespace at its own address (``staging``); any other staging is https, reached through the
egress proxy. When the launch ends the loop signs the session out (``POST
/api/v1/auth/logout`` with the cookie, ``X-CSRF-Token`` and an ``Idempotency-Key``); a missed
sign-out is bounded by the coordinator's 12-hour session lifetime.

A sign-in that fails (a refused login, a redirect, an answer without one well-formed session
cookie) fails the launch, so the review is released saying why: a verifying review is never run
unverified. Nothing is written then.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentc.client.transport import BrowserSession, Transport
from agentc.core.errors import AgentcError, ConfigError, SupervisorError
from agentc.egress.addresses import url_relay_address
from agentc.files import UnsafeFile, read_private
from agentc.files.paths import within
from agentc.supervisor.launch import rundir
from agentc.supervisor.launch.request import VerificationAccess
from agentc.supervisor.loop import coordinator

if TYPE_CHECKING:
    from agentc.supervisor.config import SupervisorConfig
    from agentc.supervisor.loop.settings import Verification

LOGIN_MAX_BYTES = 4096


@dataclass(frozen=True)
class Login:
    username: str
    password: str = field(repr=False)


def read_login(path: Path) -> Login:
    """The login file: the loop's own (no group or other access), a JSON object holding a
    non-empty ``username`` and ``password`` and nothing else. Errors never quote it."""
    try:
        data = json.loads(read_private(path, max_bytes=LOGIN_MAX_BYTES))
    except UnsafeFile as exc:
        raise SupervisorError(str(exc)) from None
    except ValueError:
        raise SupervisorError(f"{path}: not a JSON object") from None
    if not isinstance(data, dict) or set(data) != {"username", "password"}:
        raise SupervisorError(f'{path}: must hold exactly {{"username", "password"}}')
    username, password = data["username"], data["password"]
    if not (isinstance(username, str) and username and isinstance(password, str) and password):
        raise SupervisorError(f"{path}: username and password must be non-empty strings")
    return Login(username, password)


def relay_address(table: Verification) -> str | None:
    """The staging's loopback address to relay into the launch (None: not loopback)."""
    found = url_relay_address(table.url, what="staging")
    return str(found) if found is not None else None


def _origin(table: Verification) -> str:
    return table.url.rstrip("/")


def check(config: SupervisorConfig) -> None:
    """At start: every ``[verification.<project>]`` can be used, else refused naming each
    key: the login file is readable and well-formed, its directory can be hidden (not ``/``,
    not around the state root), the browser is an executable file, and a loopback staging
    address is no other relay's."""
    state = Path(os.path.realpath(config.resolved_state_dir()))
    others = {
        "egress_listen": config.egress_listen,
        "gateway_listen": config.gateway_listen,
    }
    problems: list[str] = []
    for project, table in sorted(config.verification.items()):
        key = f"verification.{project}"
        try:
            read_login(table.login_file)
        except SupervisorError as exc:
            problems.append(f"{key}.login_file: {exc}")
        hidden = Path(os.path.realpath(table.login_file.parent))
        if hidden == Path("/") or within(state, hidden):
            problems.append(
                f"{key}.login_file: {table.login_file}: its directory {hidden} is hidden from "
                f"the reviewer's launch, so it must not be / or hold the state root ({state}); "
                "keep the login in a directory of its own"
            )
        if table.browser is not None and not _executable(table.browser):
            problems.append(f"{key}.browser: {table.browser} is not an executable file")
        address = relay_address(table)
        for name, other in others.items():
            if address is not None and other == address:
                problems.append(f"{key}.url: {address} is {name}'s address; use another port")
    if problems:
        raise ConfigError("; ".join(problems))


def _executable(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.X_OK)
    except OSError:
        return False


@dataclass
class Staging:
    """A signed-in staging session the loop holds for one reviewer launch."""

    project: str
    table: Verification
    session: BrowserSession = field(repr=False)

    def access(self) -> VerificationAccess:
        hidden = Path(os.path.realpath(self.table.login_file.parent))
        return VerificationAccess(relay_address(self.table), hidden, self.table.browser)


def sign_in(config: SupervisorConfig, project: str, run: Path) -> Staging | None:
    """For a verifying project: sign in to its staging coordinator and write the run's
    ``verification.json`` and ``verification-session.json``; None for any other project.
    Raises SupervisorError naming why (then nothing is written and no session is left)."""
    table = config.verification.get(project)
    if table is None:
        return None
    origin = _origin(table)
    login = read_login(table.login_file)
    try:
        with Transport(origin, None) as transport:
            session = transport.open_browser_session(login.username, login.password)
    except AgentcError as exc:
        raise SupervisorError(
            f"signing in to the staging coordinator {origin} as {login.username!r} failed "
            f"({coordinator.describe_error(exc)}); a verifying review never runs unverified"
        ) from None
    staging = Staging(project, table, session)
    info = run / VerificationAccess.INFO
    session_file = run / VerificationAccess.SESSION
    try:
        rundir.write_new_json(
            session_file,
            {"url": origin, "cookie": {"name": session.cookie_name, "value": session.cookie}},
        )
        rundir.write_new_json(
            info,
            {
                "project_id": project,
                "url": origin,
                "session_file": str(session_file),
                "browser": str(table.browser) if table.browser is not None else None,
            },
        )
    except (SupervisorError, OSError):
        sign_out(staging)
        raise
    return staging


def sign_out(staging: Staging) -> str | None:
    """Sign the session out; returns why it failed (the session then ends by its lifetime)."""
    origin = _origin(staging.table)
    try:
        with Transport(origin, None) as transport:
            transport.close_browser_session(staging.session, str(uuid.uuid4()))
    except AgentcError as exc:
        return (
            f"signing out of the staging coordinator {origin} failed "
            f"({coordinator.describe_error(exc)}); the session ends with its 12-hour lifetime"
        )
    return None
