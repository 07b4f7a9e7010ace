"""Who is calling: bearer tokens, agent sessions with proofs, browser sessions with CSRF.

Secrets are 32 random bytes as hex; the database keeps only their SHA-256 verifiers.
Authentication is checked again inside every write transaction, after the write lock.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.engine import Connection

from agentc.core.errors import CoordinatorError
from agentc.core.model import Access, CredentialClass, PrincipalKind, PrincipalRole
from agentc.store.accounts import AgentSession, browser_by_token, credential_by_token
from agentc.store.sql import fetch_row

BROWSER_SESSION_MS = 12 * 3600 * 1000
_SECRET = re.compile(r"^[\x21-\x7e]{32,512}$")
_CSRF_PREFIX = "coordinator-browser-csrf-v1:"

# OWASP minimum for Argon2id: 19 MiB, 2 iterations, 1 lane.
_hasher = PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1, hash_len=32, salt_len=16)
_DUMMY_HASH = _hasher.hash("agentc-dummy-password-for-unknown-users")
_password_slots = threading.BoundedSemaphore(2)


def new_secret() -> str:
    return secrets.token_hex(32)


def verifier(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


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


class LoginLimiter:
    """5 attempts per username and 30 in total per 60 s, in memory, on a monotonic clock."""

    def __init__(self, per_name: int = 5, total: int = 30, window_s: float = 60.0) -> None:
        self.per_name, self.total, self.window = per_name, total, window_s
        self._all: deque[float] = deque()
        self._names: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def check(self, username: str) -> None:
        now = time.monotonic()
        with self._lock:
            while self._all and now - self._all[0] > self.window:
                self._all.popleft()
            if len(self._names) > 1024:
                self._names = {k: v for k, v in self._names.items() if v and now - v[-1] < 60}
            name = self._names.setdefault(username.lower(), deque())
            while name and now - name[0] > self.window:
                name.popleft()
            if len(self._all) >= self.total or len(name) >= self.per_name:
                raise CoordinatorError(
                    "rate_limited",
                    "too many sign-in attempts; wait a minute",
                    status=429,
                    retryable=True,
                )
            self._all.append(now)
            name.append(now)


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

    @property
    def is_human(self) -> bool:
        return self.kind == PrincipalKind.HUMAN


def unauthenticated(message: str = "authentication required") -> CoordinatorError:
    return CoordinatorError(
        "authentication_required",
        message,
        status=401,
        details={"help_path": "/api/v1/help/authentication"},
    )


def denied(message: str, **details: object) -> CoordinatorError:
    return CoordinatorError("operation_not_permitted", message, status=403, details=dict(details))


def _check_secret(value: str, what: str) -> None:
    if not _SECRET.match(value) or ";" in value or "," in value:
        raise unauthenticated(f"the {what} is malformed")


def authenticate(
    conn: Connection,
    p: Presented,
    now: int,
    *,
    write: bool,
    public_origin: str,
    lone_proof: bool = False,
) -> Actor:
    if p.duplicated or (p.bearer and p.cookie):
        raise unauthenticated("send exactly one credential (a bearer token or a browser cookie)")
    if p.bearer:
        return _agent(conn, p, now, lone_proof)
    if p.cookie:
        return _browser(conn, p, now, write=write, public_origin=public_origin)
    raise unauthenticated()


def _agent(conn: Connection, p: Presented, now: int, lone_proof: bool = False) -> Actor:
    assert p.bearer is not None
    _check_secret(p.bearer, "bearer token")
    row = credential_by_token(conn, verifier(p.bearer))
    if row is None or row.revoked_at is not None or row.disabled_at is not None:
        raise unauthenticated("the bearer token is unknown or revoked")
    actor = Actor(
        row.principal_id,
        row.principal_name,
        row.kind,
        row.role,
        row.id,
        row.credential_class,
        row.access,
    )
    if lone_proof and p.session_id is None and p.proof is not None:
        # Opening a session: the client made the proof and sends it alone, so it knows the
        # proof before the request leaves and a lost answer loses nothing.
        _check_secret(p.proof, "session proof")
        return actor
    if (p.session_id is None) != (p.proof is None):
        raise unauthenticated("X-Coordinator-Session and X-Coordinator-Session-Proof go together")
    if p.session_id is None:
        return actor
    assert p.proof is not None
    _check_secret(p.proof, "session proof")
    sess = fetch_row(conn, AgentSession, p.session_id)
    if (
        sess is None
        or sess.credential_id != row.id
        or not hmac.compare_digest(sess.proof_hash, verifier(p.proof))
    ):
        raise unauthenticated("the agent session or its proof does not match this credential")
    return Actor(
        actor.principal_id,
        actor.name,
        actor.kind,
        actor.role,
        actor.credential_id,
        actor.credential_class,
        actor.access,
        sess.id,
        sess.closed_at is not None,
    )


def _browser(conn: Connection, p: Presented, now: int, *, write: bool, public_origin: str) -> Actor:
    assert p.cookie is not None
    _check_secret(p.cookie, "session cookie")
    row = browser_by_token(conn, verifier(p.cookie))
    if row is None or row.revoked_at is not None or row.expires_at <= now or row.disabled_at:
        raise unauthenticated("the browser session is unknown, expired or revoked")
    if write:
        if p.origin != public_origin:
            raise denied("browser writes must come from the configured public origin")
        if not p.csrf or not hmac.compare_digest(p.csrf, csrf_token(p.cookie)):
            raise denied("browser writes need the X-CSRF-Token returned at sign-in")
    return Actor(row.principal_id, row.principal_name, row.kind, row.role)


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
