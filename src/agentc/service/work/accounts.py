"""Principals, agent credentials and agent sessions."""

from __future__ import annotations

import json

from sqlalchemy.engine import Connection

from agentc.core.errors import ConfigError
from agentc.core.model import CredentialClass, PrincipalKind, PrincipalRole
from agentc.core.rules import fold_name, rfc3339
from agentc.service.auth import (
    Actor,
    denied,
    hash_password,
    new_secret,
    require_admin,
    require_human,
    verifier,
)
from agentc.service.ops import JsonObject, Op, Result, new_id
from agentc.service.schemas import AgentIn, SessionIn
from agentc.service.work import grants
from agentc.service.work.refusals import conflict, invalid, missing, not_found
from agentc.store import accounts, leases
from agentc.store import grants as grant_rows
from agentc.store.accounts import AgentSession, BrowserSession, Credential, Principal
from agentc.store.audit import write_event
from agentc.store.projects import Project, project_id_named
from agentc.store.sql import fetch_row, insert


def create_admin(conn: Connection, now: int, username: str, password: str) -> str:
    """The first admin; only on an empty installation (host bootstrap)."""
    if accounts.any_principal(conn):
        raise conflict(
            "installation_not_empty",
            "init-admin works only on an empty installation; this one already has accounts",
        )
    return _add_principal(
        conn, now, username, PrincipalKind.HUMAN, PrincipalRole.ADMIN, hash_password(password)
    )


def _check_same_name(found: Principal | None, name: str) -> None:
    """Names are unique without regard to case: a name that differs from a principal's only in
    case is that principal's, refused rather than taken as another (or the same) account."""
    if found is not None and found.name != name:
        raise conflict(
            "record_conflict",
            f"the name {name} is taken: it differs only in case from {found.name}, and names "
            "are unique without regard to case",
            name=found.name,
        )


def _add_principal(
    conn: Connection,
    now: int,
    name: str,
    kind: PrincipalKind,
    role: PrincipalRole,
    password_hash: str | None,
) -> str:
    """A new enabled account; returns its id."""
    pid = new_id()
    row = Principal(pid, name, kind.value, role.value, password_hash, None, now, fold_name(name))
    insert(conn, row)
    return pid


def issue_agent_credential(
    conn: Connection,
    now: int,
    name: str,
    credential_class: str,
    access: str,
    issued_by: str | None,
    projects: list[str] | None = None,
    credential_name: str = "initial",
) -> JsonObject:
    """An agent principal (created on first use) and a new credential; the token is returned
    once and only its verifier is stored. The agent is granted the given projects (ids) in
    the same transaction; the answer lists every project it is granted."""
    if credential_class == CredentialClass.ATTEMPT:
        raise invalid(
            "credential_class",
            "attempt credentials are minted by the session holding an attempt, never issued",
        )
    agent = accounts.principal_by_name(conn, name)
    _check_same_name(agent, name)
    if agent is not None and agent.kind != PrincipalKind.AGENT:
        raise conflict("record_conflict", f"{name} is a human account, not an agent")
    if agent is None:
        pid = _add_principal(conn, now, name, PrincipalKind.AGENT, PrincipalRole.AGENT, None)
        agent = fetch_row(conn, Principal, pid)
        assert agent is not None
    grants.grant_all(conn, now, agent, projects or [], issued_by)
    data = _new_credential(
        conn, now, agent.id, (name, credential_name), credential_class, access, issued_by
    )
    data["projects"] = [g.project_id for g in grant_rows.grants_of(conn, agent.id)]
    return data


def issue_from_host(
    conn: Connection,
    now: int,
    agent: str,
    credential_class: str,
    access: str,
    projects: tuple[str, ...],
) -> JsonObject:
    """``issue-credential`` on the host: the projects named by id or name; audited."""
    ids = []
    for given in projects:
        found = given if fetch_row(conn, Project, given) else project_id_named(conn, given)
        if found is None:
            raise ConfigError(f"--project: no project with the id or name {given!r}")
        ids.append(found)
    data = issue_agent_credential(conn, now, agent, credential_class, access, None, ids)
    event = {"agent": agent, "credential_class": credential_class, "access": access}
    kind = "agent_credential_issued"
    write_event(conn, now, None, None, kind, None, data["credential_id"], {**event, "via": "host"})
    return data


def _new_credential(
    conn: Connection,
    now: int,
    pid: str,
    names: tuple[str, str],
    credential_class: str,
    access: str,
    issued_by: str | None,
) -> JsonObject:
    """A credential of the principal ``pid``; ``names`` is the agent's and the credential's."""
    name, credential_name = names
    token = new_secret()
    cid = new_id()
    insert(
        conn,
        Credential(
            id=cid,
            principal_id=pid,
            token_hash=verifier(token),
            name=credential_name,
            class_=credential_class,
            access=access,
            issued_by=issued_by,
            created_at=now,
            revoked_at=None,
        ),
    )
    return {
        "agent_id": pid,
        "agent": name,
        "credential_id": cid,
        "credential_name": credential_name,
        "credential_class": credential_class,
        "access": access,
        "token": token,
    }


def admin_issue(op: Op, body: AgentIn) -> Result:
    require_admin(op.actor, "issue agent credentials")
    data = issue_agent_credential(
        op.conn,
        op.now,
        body.name,
        body.credential_class,
        body.access,
        op.actor.principal_id,
        body.projects,
        body.credential_name,
    )
    _issued(op, data["credential_id"], body.name, body.credential_class, body.access)
    return Result(data, status=201, secret_fields=("token",))


def revoke_credential(op: Op, credential_id: str) -> Result:
    require_admin(op.actor, "revoke credentials")
    row = fetch_row(op.conn, Credential, credential_id)
    if row is None:
        raise missing(f"no credential {credential_id}")
    if row.revoked_at is None:
        accounts.revoke_credential(op.conn, credential_id, op.now)
        op.event("agent_credential_revoked", None, credential_id)
    return Result({"credential_id": credential_id, "revoked": True})


def open_session(op: Op, body: SessionIn) -> Result:
    actor = op.actor
    if actor.is_human or actor.credential_id is None:
        raise denied("agent sessions are opened with an agent's bearer token")
    if actor.credential_class == CredentialClass.INTEGRATOR:
        raise denied("integrator credentials do not open agent sessions")
    session_id = body.session_id or new_id()
    if fetch_row(op.conn, AgentSession, session_id) is not None:
        raise conflict("session_conflict", f"session {session_id} exists")
    proof = op.client_proof or new_secret()
    owner = (actor.principal_id, actor.credential_id, verifier(proof))
    described = (body.harness, body.workstation_id, json.dumps(body.capabilities))
    insert(
        op.conn,
        AgentSession(
            session_id,
            *owner,
            *described,
            created_at=op.now,
            closed_at=None,
            authority_epoch=actor.epoch,
        ),
    )
    op.event("agent_session_registered", None, session_id, harness=body.harness)
    data = {
        "session_id": session_id,
        "agent": actor.name,
        "harness": body.harness,
        "created_at": rfc3339(op.now),
        "proof_source": "client",
    }
    if op.client_proof:
        return Result(data, status=201)
    # A server-made proof is shown once; a replay of this request cannot show it again.
    return Result(
        {**data, "proof": proof, "proof_source": "server"}, status=201, secret_fields=("proof",)
    )


def session_view(conn: Connection, session_id: str, now: int) -> JsonObject:
    row = fetch_row(conn, AgentSession, session_id)
    if row is None:
        raise missing(f"no session {session_id}")
    held = leases.held_attempts(conn, session_id)
    return {
        "held_attempts": [
            {
                "attempt_id": a.id,
                "project_id": a.project_id,
                "task_id": a.task_id,
                "activity_id": a.activity_id,
                "generation": a.generation,
                "expires_at": rfc3339(a.expires_at),
                "lease_live": now < a.expires_at,
            }
            for a in held
        ],
        "session_id": row.id,
        "agent": _name_of(conn, row.principal_id),
        "principal_id": row.principal_id,
        "harness": row.harness,
        "workstation_id": row.workstation_id,
        "capabilities": json.loads(row.capabilities_json),
        "created_at": rfc3339(row.created_at),
        "closed_at": rfc3339(row.closed_at),
    }


def _name_of(conn: Connection, principal_id: str) -> str:
    principal = fetch_row(conn, Principal, principal_id)
    assert principal is not None  # sessions reference their principal
    return principal.name


def close_session(op: Op, session_id: str) -> Result:
    if op.actor.session_id != session_id:
        raise not_found("session", session_id)  # an agent sees only its own session
    accounts.close_session(op.conn, session_id, op.now)
    op.event("agent_session_closed", None, session_id)
    return Result(session_view(op.conn, session_id, op.now))


def rotate_credential(op: Op, credential_id: str) -> Result:
    """A replacement for the same principal, class and access; the old one is revoked in the
    same transaction. The new token is shown once."""
    require_admin(op.actor, "rotate credentials")
    row = fetch_row(op.conn, Credential, credential_id)
    if row is None:
        raise missing(f"no credential {credential_id}")
    if row.revoked_at is not None:
        raise conflict("credential_revoked", f"credential {credential_id} is already revoked")
    if row.attempt_id is not None:
        raise conflict(
            "attempt_credential",
            f"credential {credential_id} is bound to attempt {row.attempt_id}: revoke it "
            "(POST /api/v1/admin/credentials/{id}/revoke), it is never rotated",
        )
    agent = fetch_row(op.conn, Principal, row.principal_id)
    assert agent is not None  # credentials reference their principal
    names = (agent.name, row.name)  # the replacement keeps the credential's name
    data = _new_credential(
        op.conn, op.now, agent.id, names, row.class_, row.access, op.actor.principal_id
    )
    accounts.revoke_credential(op.conn, credential_id, op.now)
    op.event("agent_credential_revoked", None, credential_id, replaced_by=data["credential_id"])
    _issued(op, data["credential_id"], agent.name, row.class_, row.access, replaces=credential_id)
    return Result({**data, "replaces": credential_id}, status=201, secret_fields=("token",))


def change_password(
    conn: Connection, now: int, principal_id: str, new_hash: str, keep: str
) -> None:
    """A person's new password; every other browser session of theirs ends."""
    accounts.set_password_hash(conn, principal_id, new_hash)
    accounts.revoke_browser_sessions(conn, principal_id, now, keep_hash=keep)
    write_event(conn, now, principal_id, None, "password_changed", None, principal_id, {})


def recover_password(conn: Connection, now: int, username: str, new_hash: str) -> str:
    """The host's recovery of a person's password: their sessions all end; audited."""
    person = accounts.principal_by_name(conn, username)
    if person is None or person.kind != PrincipalKind.HUMAN:
        raise missing(f"no person named {username}")
    accounts.set_password_hash(conn, person.id, new_hash)
    accounts.revoke_browser_sessions(conn, person.id, now)
    write_event(
        conn, now, None, None, "password_recovered_by_host", None, person.id, {"name": username}
    )
    return person.id


def set_disabled(op: Op, principal_id: str, disabled: bool) -> Result:
    """Disable (its browser sessions end at once) or enable a person's account."""
    require_admin(op.actor, "disable accounts")
    row = fetch_row(op.conn, Principal, principal_id)
    if row is None:
        raise missing(f"no principal {principal_id}")
    if principal_id == op.actor.principal_id:
        raise denied("an admin may not disable their own account")
    accounts.set_disabled(op.conn, principal_id, op.now if disabled else None)
    if disabled:
        accounts.revoke_browser_sessions(op.conn, principal_id, op.now)
    op.event("account_disabled" if disabled else "account_enabled", None, principal_id)
    return Result({"principal_id": principal_id, "disabled": disabled})


def add_person(op: Op, name: str, role: PrincipalRole, password_hash: str) -> Result:
    """An admin adds a person (the password was hashed before the transaction)."""
    require_admin(op.actor, "add people")
    taken = accounts.principal_by_name(op.conn, name)
    _check_same_name(taken, name)
    if taken is not None:
        raise conflict("record_conflict", f"the name {name} is taken")
    pid = _add_principal(op.conn, op.now, name, PrincipalKind.HUMAN, role, password_hash)
    op.event("person_added", None, pid, name=name, role=role.value)
    return Result({"id": pid, "name": name, "role": role.value}, status=201)


def _issued(
    op: Op, credential_id: str, agent: str, class_: str, access: str, **extra: object
) -> None:
    op.event(
        "agent_credential_issued",
        None,
        credential_id,
        agent=agent,
        credential_class=class_,
        access=access,
        **extra,
    )


def browser_sessions(conn: Connection, now: int, actor: Actor, current: str | None) -> JsonObject:
    """The live browser sessions an actor may see and end: an admin's view holds everyone's,
    a person's their own; `current` is the verifier of the session asking."""
    require_human(actor, "list browser sessions")
    mine = None if actor.role == PrincipalRole.ADMIN else actor.principal_id
    return {
        "items": [
            {
                "id": s.id,
                "principal_id": s.principal_id,
                "name": s.principal_name,
                "created_at": rfc3339(s.created_at),
                "expires_at": rfc3339(s.expires_at),
                "current": s.token_hash == current,
            }
            for s in accounts.browser_session_list(conn, now, mine)
        ]
    }


def end_browser_session(op: Op, session_id: str) -> Result:
    """End one chosen browser session at once (its verifier is deleted): an admin ends
    anyone's, a person their own. Another person's session is, to a non-admin, no session."""
    require_human(op.actor, "end browser sessions")
    row = fetch_row(op.conn, BrowserSession, session_id)
    admin = op.actor.role == PrincipalRole.ADMIN
    if row is None or not (admin or row.principal_id == op.actor.principal_id):
        raise missing(f"no browser session {session_id}")
    accounts.delete_browser_session(op.conn, session_id)
    op.event("browser_session_ended", None, session_id, principal_id=row.principal_id)
    return Result({"session_id": session_id, "principal_id": row.principal_id, "ended": True})


def end_all_browser_sessions(conn: Connection, now: int, via: str) -> int:
    """End every browser session from the host (``via``: the command); audited."""
    ended = accounts.delete_all_browser_sessions(conn)
    data = {"count": ended, "via": via}
    write_event(conn, now, None, None, "browser_sessions_ended", None, None, data)
    return ended
