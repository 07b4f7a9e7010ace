"""Principals, credentials, agent sessions and browser sessions: rows and queries, including
the lookups every authenticated request makes."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.core.model import PrincipalKind
from agentc.store.sql import columns, fetch_exists, fetch_one, insert, run


class Principal(NamedTuple):
    id: str
    name: str
    kind: str
    role: str
    password_hash: str | None
    disabled_at: int | None
    created_at: int


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


class BrowserSession(NamedTuple):
    id: str
    principal_id: str
    token_hash: str
    created_at: int
    expires_at: int
    revoked_at: int | None


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


class SessionAuth(NamedTuple):
    id: str
    credential_id: str
    proof_hash: str
    closed_at: int | None


class BrowserAuth(NamedTuple):
    """A browser session's cookie with its principal."""

    principal_id: str
    expires_at: int
    revoked_at: int | None
    principal_name: str
    kind: str
    role: str
    disabled_at: int | None


_PRINCIPAL = f"SELECT {columns(Principal)} FROM principals"
_SESSION = f"SELECT {columns(AgentSession)} FROM agent_sessions"
# Plain SQL on the driver: these run on every authenticated request.
_CREDENTIAL_AUTH = (
    "SELECT c.id, c.principal_id, c.class, c.access, c.revoked_at, "
    "p.name, p.kind, p.role, p.disabled_at "
    "FROM credentials c JOIN principals p ON p.id = c.principal_id "
    "WHERE c.token_hash = :token_hash"
)
_SESSION_AUTH = "SELECT id, credential_id, proof_hash, closed_at FROM agent_sessions WHERE id = :id"
_BROWSER_AUTH = (
    "SELECT b.principal_id, b.expires_at, b.revoked_at, p.name, p.kind, "
    "p.role, p.disabled_at FROM browser_sessions b JOIN principals p ON p.id = b.principal_id "
    "WHERE b.token_hash = :token_hash"
)


def credential_by_token(conn: Connection, token_hash: str) -> CredentialAuth | None:
    return fetch_one(conn, _CREDENTIAL_AUTH, CredentialAuth, token_hash=token_hash)


def session_for_auth(conn: Connection, session_id: str) -> SessionAuth | None:
    return fetch_one(conn, _SESSION_AUTH, SessionAuth, id=session_id)


def browser_by_token(conn: Connection, token_hash: str) -> BrowserAuth | None:
    return fetch_one(conn, _BROWSER_AUTH, BrowserAuth, token_hash=token_hash)


def any_principal(conn: Connection) -> bool:
    return fetch_exists(conn, "SELECT id FROM principals LIMIT 1")


def principal_by_name(conn: Connection, name: str) -> Principal | None:
    return fetch_one(conn, _PRINCIPAL + " WHERE name = :name", Principal, name=name)


def human_by_name(conn: Connection, name: str) -> Principal | None:
    return fetch_one(
        conn,
        _PRINCIPAL + " WHERE name = :name AND kind = :kind",
        Principal,
        name=name,
        kind=PrincipalKind.HUMAN.value,
    )


def principal_name(conn: Connection, principal_id: str) -> str | None:
    return fetch_one(
        conn, "SELECT name FROM principals WHERE id = :id", lambda name: str(name), id=principal_id
    )


def insert_principal(conn: Connection, principal: Principal) -> None:
    insert(conn, "principals", principal)


def insert_credential(conn: Connection, credential: Credential) -> None:
    insert(conn, "credentials", credential)


def get_credential(conn: Connection, credential_id: str) -> Credential | None:
    return fetch_one(
        conn,
        f"SELECT {columns(Credential)} FROM credentials WHERE id = :id",
        Credential,
        id=credential_id,
    )


def revoke_credential(conn: Connection, credential_id: str, now: int) -> None:
    """Revoke the credential and close its open agent sessions."""
    run(conn, "UPDATE credentials SET revoked_at = :now WHERE id = :id", now=now, id=credential_id)
    run(
        conn,
        "UPDATE agent_sessions SET closed_at = :now "
        "WHERE credential_id = :id AND closed_at IS NULL",
        now=now,
        id=credential_id,
    )


def session_exists(conn: Connection, session_id: str) -> bool:
    return fetch_exists(conn, "SELECT id FROM agent_sessions WHERE id = :id", id=session_id)


def get_session(conn: Connection, session_id: str) -> AgentSession | None:
    return fetch_one(conn, _SESSION + " WHERE id = :id", AgentSession, id=session_id)


def insert_session(conn: Connection, session: AgentSession) -> None:
    insert(conn, "agent_sessions", session)


def close_session(conn: Connection, session_id: str, now: int) -> None:
    run(
        conn,
        "UPDATE agent_sessions SET closed_at = :now WHERE id = :id AND closed_at IS NULL",
        now=now,
        id=session_id,
    )


def insert_browser_session(conn: Connection, session: BrowserSession) -> None:
    insert(conn, "browser_sessions", session)
