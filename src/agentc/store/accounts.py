"""Principals, credentials, agent sessions and browser sessions: rows and queries, including
the lookups every authenticated request makes."""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from agentc.core.rules import fold_name
from agentc.store.audit import Receipt
from agentc.store.epoch import CURRENT_EPOCH
from agentc.store.sql import (
    columns,
    fetch_all,
    fetch_count,
    fetch_exists,
    fetch_one,
    placeholders,
    run,
    table,
)


@table("principals")
class Principal(NamedTuple):
    id: str
    name: str
    kind: str
    role: str
    password_hash: str | None
    disabled_at: int | None
    created_at: int
    name_key: str  # the name as names are compared (agentc.core.rules.fold_name): unique


@table("credentials")
class Credential(NamedTuple):
    id: str
    principal_id: str
    token_hash: str
    name: str
    class_: str  # the column `class`
    access: str
    issued_by: str | None
    created_at: int
    revoked_at: int | None
    attempt_id: str | None = None  # an attempt credential's attempt (class `attempt`)


@table("agent_sessions")
class AgentSession(NamedTuple):
    id: str
    principal_id: str
    credential_id: str
    proof_hash: str
    harness: str
    workstation_id: str | None
    capabilities_json: str
    created_at: int
    closed_at: int | None
    authority_epoch: str  # the epoch it was made under (agentc.store.epoch)


@table("browser_sessions")
class BrowserSession(NamedTuple):
    id: str
    principal_id: str
    token_hash: str
    created_at: int
    expires_at: int
    revoked_at: int | None
    origin: str | None  # the public origin it was made at, the only one it is good at
    authority_epoch: str  # the epoch it was made under (agentc.store.epoch)


class CredentialAuth(NamedTuple):
    """A bearer token's credential with its principal."""

    id: str
    principal_id: str
    credential_class: str
    access: str
    revoked_at: int | None
    principal_name: str
    kind: str
    role: str
    disabled_at: int | None


class BoundAttempt(NamedTuple):
    """The attempt an attempt credential is bound to, as authentication reads it."""

    id: str
    project_id: str
    task_id: str
    session_id: str
    state: str
    expires_at: int


class CredentialListing(NamedTuple):
    """A credential as the Access page lists it (never its verifier)."""

    id: str
    principal_id: str
    name: str
    credential_class: str
    access: str
    created_at: int
    revoked_at: int | None
    principal_name: str


class AgentAuth(NamedTuple):
    """A bearer token's credential with its principal, the agent session the request names
    (None fields when there is none by that id) and the principal's role in the project the
    request names (None when not granted): one query for what every agent request checks.
    A mutation's query also reads the principal's receipt for its operation and key (None:
    none yet, or not asked for). For an attempt credential, ``attempt`` is the attempt it is
    bound to (None when that attempt is gone) and the session fields are its session's."""

    credential: CredentialAuth
    session_id: str | None
    session_credential_id: str | None
    session_proof_hash: str | None
    session_closed_at: int | None
    project_role: str | None
    receipt: Receipt | None = None
    bound: str | None = None  # the credential's attempt_id
    attempt: BoundAttempt | None = None
    session_epoch: str | None = None  # the authority epoch the session was made under
    epoch: str = ""  # the installation's authority epoch now


class BrowserAuth(NamedTuple):
    """A browser session's cookie with its principal."""

    principal_id: str
    expires_at: int
    revoked_at: int | None
    principal_name: str
    kind: str
    role: str
    disabled_at: int | None
    origin: str | None
    session_epoch: str  # the authority epoch the session was made under
    epoch: str  # the installation's authority epoch now


_PRINCIPAL = f"SELECT {columns(Principal)} FROM principals"
_PRINCIPAL_BY_NAME = _PRINCIPAL + " WHERE name_key = :key"
_REVOKE = "UPDATE credentials SET revoked_at = :now WHERE id = :id"
_CLOSE_SESSIONS_OF = (
    "UPDATE agent_sessions SET closed_at = :now WHERE credential_id = :id AND closed_at IS NULL"
)
_CLOSE_SESSION = "UPDATE agent_sessions SET closed_at = :now WHERE id = :id AND closed_at IS NULL"
# Plain SQL on the driver: these run on every authenticated request. An attempt credential's
# attempt (a) is joined on, and its session is the attempt's: it presents none of its own.
_AGENT_AUTH = (
    "SELECT c.id, c.principal_id, c.class, c.access, c.revoked_at, "
    "p.name, p.kind, p.role, p.disabled_at, "
    "s.id, s.credential_id, s.proof_hash, s.closed_at, g.role, c.attempt_id, "
    "a.id, a.project_id, a.task_id, a.session_id, a.state, a.expires_at, "
    f"s.authority_epoch, {CURRENT_EPOCH} "
    "FROM credentials c JOIN principals p ON p.id = c.principal_id "
    "LEFT JOIN attempts a ON a.id = c.attempt_id "
    "LEFT JOIN agent_sessions s ON s.id = COALESCE(a.session_id, :session_id) "
    "LEFT JOIN project_grants g ON g.principal_id = c.principal_id "
    "AND g.project_id = :project_id "
    "WHERE c.token_hash = :token_hash"
)


def _with(sql: str, old: str, new: str) -> str:
    """``sql`` with its one ``old`` part replaced (import fails if the part is not there once)."""
    if sql.count(old) != 1:
        raise AssertionError(f"the agent authentication query has changed: {old!r}")
    return sql.replace(old, new)


# The same query, with the request's receipt (idempotency) joined on.
_AGENT_AUTH_RECEIPT = _with(
    _with(_AGENT_AUTH, " FROM credentials c ", f", {columns(Receipt, 'r')} FROM credentials c "),
    " WHERE c.token_hash",
    " LEFT JOIN receipts r ON r.principal_id = c.principal_id "
    "AND r.operation = :operation AND r.key = :key WHERE c.token_hash",
)
_BROWSER_AUTH = (
    "SELECT b.principal_id, b.expires_at, b.revoked_at, p.name, p.kind, "
    f"p.role, p.disabled_at, b.origin, b.authority_epoch, {CURRENT_EPOCH} "
    "FROM browser_sessions b "
    "JOIN principals p ON p.id = b.principal_id "
    "WHERE b.token_hash = :token_hash"
)


_CREDENTIAL_WIDTH = len(CredentialAuth._fields)
_SESSION_END = _CREDENTIAL_WIDTH + 5
_AUTH_WIDTH = _SESSION_END + 1 + len(BoundAttempt._fields)  # then the two epochs


def _agent_auth(*row: Any) -> AgentAuth:  # the driver's values, in _AGENT_AUTH's order
    n, b, m = _CREDENTIAL_WIDTH, _SESSION_END, _AUTH_WIDTH
    # The receipt's columns (when asked for) are all null when there is none.
    receipt = Receipt(*row[m + 2 :]) if len(row) > m + 2 and row[m + 2] is not None else None
    session_id, session_credential_id, proof_hash, closed_at, role = row[n:b]
    attempt = BoundAttempt(*row[b + 1 : m]) if row[b + 1] is not None else None
    return AgentAuth(
        CredentialAuth(*row[:n]),
        session_id,
        session_credential_id,
        proof_hash,
        closed_at,
        role,
        receipt,
        row[b],
        attempt,
        row[m],
        row[m + 1],
    )


def agent_auth(
    conn: Connection,
    token_hash: str,
    session_id: str | None,
    project_id: str | None,
    receipt_of: tuple[str, str] | None = None,
) -> AgentAuth | None:
    """The credential of token_hash with the session session_id and the role in project_id
    (see AgentAuth), or None when no credential has that token; with receipt_of (operation,
    key), the principal's receipt for them as well."""
    if receipt_of is None:
        return fetch_one(
            conn,
            _AGENT_AUTH,
            _agent_auth,
            token_hash=token_hash,
            session_id=session_id,
            project_id=project_id,
        )
    operation, key = receipt_of
    return fetch_one(
        conn,
        _AGENT_AUTH_RECEIPT,
        _agent_auth,
        token_hash=token_hash,
        session_id=session_id,
        project_id=project_id,
        operation=operation,
        key=key,
    )


def browser_by_token(conn: Connection, token_hash: str) -> BrowserAuth | None:
    return fetch_one(conn, _BROWSER_AUTH, BrowserAuth, token_hash=token_hash)


def any_principal(conn: Connection) -> bool:
    return fetch_exists(conn, "SELECT id FROM principals LIMIT 1")


def principal_by_name(conn: Connection, name: str) -> Principal | None:
    """The principal of that name, without regard to case (names are unique so)."""
    return fetch_one(conn, _PRINCIPAL_BY_NAME, Principal, key=fold_name(name))


def revoke_credential(conn: Connection, credential_id: str, now: int) -> None:
    """Revoke the credential and close its open agent sessions."""
    run(conn, _REVOKE, now=now, id=credential_id)
    run(conn, _CLOSE_SESSIONS_OF, now=now, id=credential_id)


def close_session(conn: Connection, session_id: str, now: int) -> None:
    run(conn, _CLOSE_SESSION, now=now, id=session_id)


def revoke_attempt_credentials(conn: Connection, attempt_id: str, now: int) -> int:
    """Revoke every live credential bound to the attempt; how many there were."""
    return run(
        conn,
        "UPDATE credentials SET revoked_at = :now WHERE attempt_id = :a AND revoked_at IS NULL",
        now=now,
        a=attempt_id,
    )


def live_attempt_credentials(conn: Connection, attempt_id: str) -> int:
    """How many unrevoked credentials are bound to the attempt."""
    return fetch_count(
        conn,
        "SELECT COUNT(*) FROM credentials WHERE attempt_id = :a AND revoked_at IS NULL",
        a=attempt_id,
    )


_PRINCIPALS = _PRINCIPAL + " ORDER BY kind, name"
# Attempt credentials live and die with their attempts; the Access page lists the others.
_CREDENTIALS = (
    "SELECT c.id, c.principal_id, c.name, c.class, c.access, c.created_at, c.revoked_at, "
    "p.name FROM credentials c "
    "JOIN principals p ON p.id = c.principal_id WHERE c.attempt_id IS NULL "
    "ORDER BY p.name, c.created_at DESC"
)


def all_principals(conn: Connection) -> list[Principal]:
    return fetch_all(conn, _PRINCIPALS, Principal)


def all_credentials(conn: Connection) -> list[CredentialListing]:
    """Every credential with its principal's name (the Access page)."""
    return fetch_all(conn, _CREDENTIALS, CredentialListing)


def end_browser_session(conn: Connection, token_hash: str) -> None:
    """Sign-out: the session's verifier is deleted, so the cookie matches nothing."""
    run(conn, "DELETE FROM browser_sessions WHERE token_hash = :h", h=token_hash)


def revoke_browser_sessions(
    conn: Connection, principal_id: str, now: int, keep_hash: str | None = None
) -> None:
    """End every browser session of the person (but the one whose verifier is keep_hash)."""
    run(
        conn,
        "DELETE FROM browser_sessions WHERE principal_id = :p AND token_hash <> :keep",
        p=principal_id,
        keep=keep_hash or "",
    )


def set_password_hash(conn: Connection, principal_id: str, password_hash: str) -> None:
    run(
        conn,
        "UPDATE principals SET password_hash = :h WHERE id = :id",
        h=password_hash,
        id=principal_id,
    )


def set_disabled(conn: Connection, principal_id: str, disabled_at: int | None) -> None:
    run(
        conn,
        "UPDATE principals SET disabled_at = :d WHERE id = :id",
        d=disabled_at,
        id=principal_id,
    )


class LiveSessions(NamedTuple):
    principal_id: str
    live: int


def live_browser_sessions(conn: Connection, now: int) -> dict[str, int]:
    """How many live browser sessions each person has."""
    rows = fetch_all(
        conn,
        "SELECT principal_id, COUNT(*) FROM browser_sessions "
        "WHERE revoked_at IS NULL AND expires_at > :now GROUP BY principal_id",
        LiveSessions,
        now=now,
    )
    return {r.principal_id: r.live for r in rows}


class SessionListing(NamedTuple):
    """A live browser session with its person (the Access and My account pages)."""

    id: str
    principal_id: str
    principal_name: str
    token_hash: str
    created_at: int
    expires_at: int


_SESSION_LIST = (
    "SELECT b.id, b.principal_id, p.name, b.token_hash, b.created_at, b.expires_at "
    "FROM browser_sessions b JOIN principals p ON p.id = b.principal_id "
    "WHERE b.revoked_at IS NULL AND b.expires_at > :now"
)


def browser_session_list(
    conn: Connection, now: int, principal_id: str | None = None
) -> list[SessionListing]:
    """The live browser sessions (of one person, or everyone's), by person then age."""
    if principal_id is None:
        sql = _SESSION_LIST + " ORDER BY p.name, b.created_at, b.id"
        return fetch_all(conn, sql, SessionListing, now=now)
    sql = _SESSION_LIST + " AND b.principal_id = :p ORDER BY b.created_at, b.id"
    return fetch_all(conn, sql, SessionListing, now=now, p=principal_id)


def delete_browser_session(conn: Connection, session_id: str) -> None:
    """End one chosen session: its verifier is deleted, so its cookie matches nothing."""
    run(conn, "DELETE FROM browser_sessions WHERE id = :id", id=session_id)


class LiveSecret(NamedTuple):
    """A live secret of the coordinator: its verifier, and what it is (``credential``,
    ``agent_session`` or ``browser_session``)."""

    verifier: str
    kind: str


def live_secret(conn: Connection, verifiers: list[str], now: int) -> LiveSecret | None:
    """The first of ``verifiers`` (SHA-256 digests of token-shaped strings an agent sent) that
    is a secret of the coordinator: an agent credential (revoked ones too: a launch's credential
    is revoked the moment the launch ends, before the loop sends on what the launch printed), an
    open agent session's proof, a browser session neither ended nor expired. One query, whatever the
    number of verifiers (the caller bounds it)."""
    names, params = placeholders("v", verifiers)
    sql = (
        f"SELECT token_hash, 'credential' FROM credentials WHERE token_hash IN ({names}) "
        f"UNION ALL SELECT proof_hash, 'agent_session' FROM agent_sessions "
        f"WHERE proof_hash IN ({names}) AND closed_at IS NULL "
        f"UNION ALL SELECT token_hash, 'browser_session' FROM browser_sessions "
        f"WHERE token_hash IN ({names}) AND revoked_at IS NULL AND expires_at > :now "
        "LIMIT 1"
    )
    return fetch_one(conn, sql, LiveSecret, now=now, **params)


def delete_all_browser_sessions(conn: Connection) -> int:
    """End every browser session (their verifiers are deleted); how many there were."""
    return run(conn, "DELETE FROM browser_sessions")
