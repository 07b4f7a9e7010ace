"""Who is calling: bearer tokens, agent sessions with proofs, browser sessions with CSRF.

Secrets are 32 random bytes as hex; the database keeps only their SHA-256 verifiers.
Authentication is checked again inside every write transaction, after the write lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.engine import Connection

from agentc.core import lease
from agentc.core.browser import cookie_name, is_secret
from agentc.core.errors import CoordinatorError
from agentc.core.model import (
    Access,
    AttemptState,
    CredentialClass,
    PrincipalKind,
    PrincipalRole,
    ProjectRole,
)
from agentc.core.secrets import verifier as verifier  # re-exported: the one home is core
from agentc.service.attempt_scope import AttemptScope
from agentc.service.work.refusals import project_not_found
from agentc.store import grants
from agentc.store.accounts import AgentAuth, agent_auth, browser_by_token
from agentc.store.audit import Receipt, get_receipt
from agentc.store.projects import Project, all_projects

BROWSER_SESSION_MS = 12 * 3600 * 1000
_CSRF_PREFIX = "coordinator-browser-csrf-v1:"

# OWASP minimum for Argon2id: 19 MiB, 2 iterations, 1 lane.
_hasher = PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1, hash_len=32, salt_len=16)
_DUMMY_HASH = _hasher.hash("agentc-dummy-password-for-unknown-users")
_password_slots = threading.BoundedSemaphore(2)


def new_secret() -> str:
    return secrets.token_hex(32)


def csrf_token(cookie: str) -> str:
    return hashlib.sha256((_CSRF_PREFIX + cookie).encode()).hexdigest()


def hash_password(password: str) -> str:
    check_password_policy(password)
    return _hasher.hash(password)


def check_password_policy(password: str) -> None:
    if not 12 <= len(password.encode()) <= 1024:
        raise CoordinatorError(
            "invalid_input",
            "password: must be 12 to 1024 bytes long",
            status=422,
            details={"field": "password"},
        )


def verify_password(stored_hash: str | None, password: str) -> bool:
    """Constant work whether or not the user exists; at most two checks at once."""
    if not _password_slots.acquire(timeout=5):
        raise CoordinatorError(
            "rate_limited",
            "too many sign-ins at once; retry shortly",
            status=429,
            retryable=True,
        )
    try:
        _hasher.verify(stored_hash or _DUMMY_HASH, password)
        return stored_hash is not None
    except (VerificationError, InvalidHashError):
        return False
    finally:
        _password_slots.release()


@dataclass(frozen=True)
class Presented:
    """The credentials a request carried, before they are checked."""

    bearer: str | None = None
    cookie: str | None = None
    session_id: str | None = None
    proof: str | None = None
    origin: str | None = None
    csrf: str | None = None
    duplicated: bool = False


@dataclass(frozen=True)
class Actor:
    principal_id: str
    name: str
    kind: str  # a PrincipalKind
    role: str
    credential_id: str | None = None
    credential_class: str | None = None
    access: str | None = None
    session_id: str | None = None
    session_closed: bool = False
    # An attempt credential's attempt: the requests it may make (agentc.service.attempt_scope).
    scope: AttemptScope | None = None
    # The installation's authority epoch, read with the credential (agentc.store.epoch): what
    # the sessions and receipts made for this request are stamped with.
    epoch: str = ""

    @property
    def is_human(self) -> bool:
        return self.kind == PrincipalKind.HUMAN

    @property
    def has_every_project(self) -> bool:
        """Admins reach every project; everyone else only the projects granted to them."""
        return self.is_human and self.role == PrincipalRole.ADMIN


def unauthenticated(message: str = "authentication required") -> CoordinatorError:
    return CoordinatorError(
        "authentication_required",
        message,
        status=401,
        details={"help_path": "/api/v1/help/authentication"},
    )


def previous_restore(what: str) -> CoordinatorError:
    """The refusal of anything made before the coordinator was restored from a backup."""
    return CoordinatorError(
        "request_from_previous_restore",
        f"the coordinator was restored from a backup; {what} belongs to the installation before "
        "the restore and is void: open a new session and start the work afresh",
        status=409,
    )


def denied(message: str, **details: object) -> CoordinatorError:
    return CoordinatorError("operation_not_permitted", message, status=403, details=dict(details))


def browser_cookie(cookies: Mapping[str, str], https: bool) -> str | None:
    return cookies.get(cookie_name(https))


def _check_secret(value: str, what: str) -> None:
    if not is_secret(value):
        raise unauthenticated(f"the {what} is malformed")


def authenticate(
    conn: Connection,
    p: Presented,
    now: int,
    *,
    write: bool,
    public_origin: str,
    lone_proof: bool = False,
    project_id: str | None = None,
    route: str | None = None,
) -> Actor:
    """Who is calling, checked for what the request is (``public_origin``: the one a browser
    session must have been made at, and a browser write's Origin): a write (read-only
    credentials make none), when the route names a project (its `{project_id}`) that project,
    and for an attempt credential the request itself (``route``, ``METHOD /path``; None: a
    flow for people only). Every API read and mutation and every console page and form comes
    through here, so this is the one place project scoping is enforced."""
    actor, _receipt = _authenticate(
        conn, p, now, write, public_origin, lone_proof, project_id, route
    )
    return actor


def authenticate_mutation(
    conn: Connection,
    p: Presented,
    now: int,
    *,
    public_origin: str,
    lone_proof: bool,
    project_id: str | None,
    operation: str,
    key: str,
) -> tuple[Actor, Receipt | None]:
    """`authenticate` for a write, with the caller's receipt for (operation, key) if it has
    one: an agent's is read by the authentication query itself (no round trip of its own)."""
    actor, receipt = _authenticate(
        conn, p, now, True, public_origin, lone_proof, project_id, operation, (operation, key)
    )
    if isinstance(receipt, _Unread):
        receipt = get_receipt(conn, actor.principal_id, operation, key)
    if receipt is not None and receipt.authority_epoch != actor.epoch:
        raise previous_restore("this Idempotency-Key's request")
    return actor, receipt


def _authenticate(
    conn: Connection,
    p: Presented,
    now: int,
    write: bool,
    public_origin: str,
    lone_proof: bool,
    project_id: str | None,
    route: str | None,
    receipt_of: tuple[str, str] | None = None,
) -> tuple[Actor, Receipt | None | _Unread]:
    if p.duplicated or (p.bearer and p.cookie):
        raise unauthenticated("send exactly one credential (a bearer token or a browser cookie)")
    role: str | None | _Unread = UNREAD
    receipt: Receipt | None | _Unread = UNREAD
    if p.bearer:
        actor, found = _agent(conn, p, now, lone_proof, project_id, receipt_of)
        role, receipt = found.project_role, found.receipt
    elif p.cookie:
        actor = _browser(conn, p, now, write=write, public_origin=public_origin)
    else:
        raise unauthenticated()
    if actor.scope is not None:
        actor.scope.check(route)
    if write and actor.access == Access.READ:
        raise denied("this credential has read access only")
    if project_id is not None:
        require_project(conn, actor, project_id, write=write, role=role)
    return actor, receipt


class _Unread:
    """The caller's role in the project has not been read yet."""


UNREAD = _Unread()


def require_project(
    conn: Connection,
    actor: Actor,
    project_id: str,
    *,
    write: bool,
    role: str | None | _Unread = UNREAD,
) -> None:
    """The caller must be granted the project (admins have every project). A project the
    caller is not granted is answered exactly as one that does not exist (404), so its id
    leaks nothing; a viewer may read the project but not change it. `role` is the caller's
    grant when the authentication query already read it (None: not granted)."""
    if actor.has_every_project:
        return
    if isinstance(role, _Unread):
        role = grants.role_in(conn, actor.principal_id, project_id)
    if role is None:
        raise project_not_found(project_id)
    if write and role == ProjectRole.VIEWER:
        raise denied(f"your role in project {project_id} is viewer (read only)")


def visible_projects(conn: Connection, actor: Actor) -> list[Project]:
    """The projects the caller may see: every project for an admin, else its grants."""
    if actor.has_every_project:
        return all_projects(conn)
    return grants.projects_of(conn, actor.principal_id)


def _agent(
    conn: Connection,
    p: Presented,
    now: int,
    lone_proof: bool,
    project_id: str | None,
    receipt_of: tuple[str, str] | None,
) -> tuple[Actor, AgentAuth]:
    """The agent, read in one query with the session it names (an attempt credential's: its
    attempt's), its role in project_id and (receipt_of) its receipt."""
    assert p.bearer is not None
    _check_secret(p.bearer, "bearer token")
    # The session is looked up only when it comes with its proof, as it is checked.
    session_id = p.session_id if p.proof is not None else None
    found = agent_auth(conn, verifier(p.bearer), session_id, project_id, receipt_of)
    row = found.credential if found is not None else None
    if row is None or row.revoked_at is not None or row.disabled_at is not None:
        raise unauthenticated("the bearer token is unknown or revoked")
    assert found is not None
    actor = Actor(
        row.principal_id,
        row.principal_name,
        row.kind,
        row.role,
        row.id,
        row.credential_class,
        row.access,
        epoch=found.epoch,
    )
    if found.bound is not None:
        return _bound(actor, found, p, now), found
    if row.credential_class == CredentialClass.ATTEMPT:  # never issued unbound; refused if it is
        raise unauthenticated("an attempt credential without its attempt")
    if lone_proof and p.session_id is None and p.proof is not None:
        # Opening a session: the client made the proof and sends it alone, so it knows the
        # proof before the request leaves and a lost answer loses nothing.
        _check_secret(p.proof, "session proof")
        return actor, found
    if (p.session_id is None) != (p.proof is None):
        raise unauthenticated("X-Coordinator-Session and X-Coordinator-Session-Proof go together")
    if p.session_id is None:
        return actor, found
    assert p.proof is not None
    _check_secret(p.proof, "session proof")
    if found.session_id is None and found.epoch:
        raise previous_restore(f"the agent session {p.session_id}")
    if (
        found.session_id is None
        or found.session_credential_id != row.id
        or found.session_proof_hash is None
        or not hmac.compare_digest(found.session_proof_hash, verifier(p.proof))
    ):
        raise unauthenticated("the agent session or its proof does not match this credential")
    if found.session_epoch != found.epoch:
        raise previous_restore(f"the agent session {found.session_id}")
    return dataclasses.replace(
        actor, session_id=found.session_id, session_closed=found.session_closed_at is not None
    ), found


def _bound(actor: Actor, found: AgentAuth, p: Presented, now: int) -> Actor:
    """An attempt credential's actor: alive only while its attempt is active with a live lease
    and its session open; it acts in that session and within that attempt's scope."""
    if found.session_id is not None and found.session_epoch != found.epoch:
        raise previous_restore(f"the agent session {found.session_id}")
    attempt = found.attempt
    if (
        attempt is None
        or attempt.state != AttemptState.ACTIVE
        or not lease.is_live(now, attempt.expires_at)
    ):
        state = "gone" if attempt is None else attempt.state
        if attempt is not None and state == AttemptState.ACTIVE:
            state = "lapsed"
        raise unauthenticated(
            f"this attempt credential's attempt {found.bound} has ended ({state}); "
            "it works only while its attempt is active"
        )
    if p.session_id is not None or p.proof is not None:
        raise unauthenticated(
            "an attempt credential carries its attempt's session: send no "
            "X-Coordinator-Session or X-Coordinator-Session-Proof"
        )
    if found.session_id is None or found.session_closed_at is not None:
        raise unauthenticated("this attempt credential's session is closed")
    scope = AttemptScope(attempt.project_id, attempt.task_id, attempt.id, attempt.session_id)
    return dataclasses.replace(actor, session_id=attempt.session_id, scope=scope)


def _browser(conn: Connection, p: Presented, now: int, *, write: bool, public_origin: str) -> Actor:
    assert p.cookie is not None
    _check_secret(p.cookie, "session cookie")
    row = browser_by_token(conn, verifier(p.cookie))
    if row is None or row.revoked_at is not None or row.expires_at <= now or row.disabled_at:
        raise unauthenticated("the browser session is unknown, expired or revoked")
    if row.session_epoch != row.epoch:
        raise unauthenticated(
            "the coordinator was restored from a backup and sessions from before the restore "
            "are void; sign in again"
        )
    if row.origin != public_origin:
        # Made at another address of the console (its port changed, or before sessions kept
        # theirs): whoever was sent the cookie there must not use it here.
        raise unauthenticated("this browser session was made at another address; sign in again")
    if write:
        if p.origin != public_origin:
            raise denied("browser writes must come from the configured public origin")
        if not p.csrf or not hmac.compare_digest(p.csrf, csrf_token(p.cookie)):
            raise denied("browser writes need the X-CSRF-Token returned at sign-in")
    return Actor(row.principal_id, row.principal_name, row.kind, row.role, epoch=row.epoch)


def require_human(actor: Actor, what: str) -> None:
    if not actor.is_human:
        raise CoordinatorError(
            "operation_not_permitted",
            f"only a human may {what}",
            status=403,
            details={"required_actor": PrincipalKind.HUMAN.value},
        )


def require_admin(actor: Actor, what: str) -> None:
    if not (actor.is_human and actor.role == PrincipalRole.ADMIN):
        raise CoordinatorError(
            "operation_not_permitted",
            f"only an admin may {what}",
            status=403,
            details={"required_actor": PrincipalRole.ADMIN.value},
        )


def require_agent_session(actor: Actor) -> str:
    if actor.is_human:
        raise denied("this operation is for agent sessions")
    if actor.session_id is None:
        raise CoordinatorError(
            "session_required",
            "this operation needs an agent session: open one with POST /api/v1/sessions and "
            "send X-Coordinator-Session and X-Coordinator-Session-Proof",
            status=403,
        )
    if actor.session_closed:
        raise CoordinatorError("session_closed", "the agent session is closed", status=403)
    require_write(actor)
    return actor.session_id


def require_write(actor: Actor) -> None:
    if actor.access == Access.READ:
        raise denied("this credential has read access only")
    if actor.credential_class == CredentialClass.INTEGRATOR:
        raise denied("integrator credentials may only record integration")
