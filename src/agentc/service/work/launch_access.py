"""Attempt credentials: what a launch holds instead of its role's long-lived credential.

The session holding an attempt mints a credential bound to that attempt
(``POST .../attempts/{id}/credentials``) and hands only it to the launch working on the attempt.
The credential acts in the attempt's session, for the requests
:class:`agentc.service.attempt_scope.AttemptScope` lists, and only while the attempt is active
with a live lease and its session open (authentication checks all of it on every request,
`agentc.service.auth`); the attempt's agent revokes it when the launch ends
(``POST .../attempts/{id}/credentials/revoke``). The token is shown once; the coordinator keeps
only its verifier, like every other credential's.
"""

from __future__ import annotations

from agentc.core.model import Access, CredentialClass, PrincipalRole
from agentc.service.auth import denied, new_secret, verifier
from agentc.service.ops import Op, Result, new_id
from agentc.service.schemas import GenerationIn
from agentc.service.work.leases import owned_attempt
from agentc.service.work.refusals import conflict, missing
from agentc.store import accounts, leases
from agentc.store.accounts import Credential
from agentc.store.sql import insert

MAX_LIVE = 4  # unrevoked credentials per attempt (one per launch; a lost answer mints again)


def mint(op: Op, project_id: str, attempt_id: str, body: GenerationIn) -> Result:
    """A new credential bound to the caller's live attempt (its token, shown once)."""
    row = owned_attempt(op, project_id, attempt_id, body.generation)
    if op.actor.scope is not None:  # never reached: the scope has no such route; kept explicit
        raise denied("an attempt credential cannot mint credentials")
    if row.activity_id is not None:
        raise conflict(
            "attempt_credential_not_allowed",
            "a review attempt gets no attempt credential: reviewer launches never reach the "
            "coordinator",
        )
    if accounts.live_attempt_credentials(op.conn, attempt_id) >= MAX_LIVE:
        raise conflict(
            "too_many_attempt_credentials",
            f"attempt {attempt_id} already has {MAX_LIVE} live credentials; revoke them first",
        )
    token, credential_id = new_secret(), new_id()
    insert(
        op.conn,
        Credential(
            id=credential_id,
            principal_id=op.actor.principal_id,
            token_hash=verifier(token),
            name=f"attempt {attempt_id}"[:100],
            class_=CredentialClass.ATTEMPT.value,
            access=Access.WRITE.value,
            issued_by=op.actor.principal_id,
            created_at=op.now,
            revoked_at=None,
            attempt_id=attempt_id,
        ),
    )
    op.event("attempt_credential.minted", project_id, attempt_id, credential_id=credential_id)
    data = {"credential_id": credential_id, "attempt_id": attempt_id, "token": token}
    return Result(data, status=201, secret_fields=("token",))


def revoke(op: Op, project_id: str, attempt_id: str, body: GenerationIn) -> Result:
    """Revoke every credential bound to the attempt, in any state of the attempt: for its own
    agent (a credential that is not itself an attempt credential) or an admin."""
    row = leases.get_project_attempt(op.conn, project_id, attempt_id)
    if row is None:
        raise missing(f"no attempt {attempt_id}")
    actor = op.actor
    admin = actor.is_human and actor.role == PrincipalRole.ADMIN
    if not admin and (actor.is_human or actor.principal_id != row.owner_id):
        raise denied("only the attempt's own agent or an admin may revoke its credentials")
    if row.generation != body.generation:
        raise conflict(
            "lease_expired",
            f"generation {body.generation} is not this attempt's ({row.generation})",
            current_generation=row.generation,
        )
    count = accounts.revoke_attempt_credentials(op.conn, attempt_id, op.now)
    if count:
        op.event("attempt_credential.revoked", project_id, attempt_id, count=count)
    return Result({"attempt_id": attempt_id, "revoked": count})
