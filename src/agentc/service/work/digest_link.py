"""The signed "I read this" link of a mailed digest (docs/attention.md).

A link is ``<public origin>/console/digest-read/<token>``, the token ``<payload>.<mac>``: the
payload (base64url JSON) names the project, the principal that minted it and when it expires
(7 days), the MAC is an HMAC-SHA256 under a key of the service (``service_state``). It can do
one thing: record a read of that project's digest, kept under the principal that minted it.
It is not a login, a session or an API credential. Opening it only shows a button (a mail
scanner that fetches it records nothing); pressing the button records the read.

Only a person granted the project or the project's designated digest sender may mint one; an
agent that is not the sender is refused (a read silences the neglect page, and agents must not
be able to do that). A link stops working when it expires, when its principal is disabled,
loses the project, or (an agent) is no longer the project's sender.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from sqlalchemy.engine import Connection

from agentc.core.errors import AgentcError, CoordinatorError
from agentc.core.model import PrincipalKind
from agentc.core.rules import rfc3339
from agentc.service.auth import Actor, denied
from agentc.service.ops import JsonObject
from agentc.service.work import attention
from agentc.service.work.views import project_row
from agentc.store import grants, projects, throttle
from agentc.store.accounts import Principal
from agentc.store.sql import fetch_row

LINK_MS = 7 * 24 * 3600 * 1000
KEY_NAME = "digest_link_key"
_MAC = b"agentc-digest-read-v1|"
PATH = "/console/digest-read/"


class BadLink(AgentcError):
    """Why a link records nothing (shown to whoever opened it)."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _mac(key: str, payload: str) -> str:
    return hmac.new(bytes.fromhex(key), _MAC + payload.encode(), hashlib.sha256).hexdigest()


def may_mint(conn: Connection, actor: Actor, project_id: str) -> None:
    if actor.is_human or projects.digest_sender(conn, project_id) == actor.principal_id:
        return
    raise denied(
        "only a person or the project's designated digest sender may have a read link (a read "
        "silences the neglect page)"
    )


def key_made(conn: Connection) -> None:
    """The links' key exists (made once, in a write, before the first link is minted)."""
    if throttle.service_key(conn, KEY_NAME) is None:
        throttle.service_key_made(conn, KEY_NAME)


def has_key(conn: Connection) -> bool:
    return throttle.service_key(conn, KEY_NAME) is not None


def mint(
    conn: Connection, actor: Actor, project_id: str, now: int, public_origin: str
) -> JsonObject:
    """A new link for the caller (``GET /projects/{p}/digest/read-link``: a read, like the
    digest, so a read-only credential of the digest sender may ask)."""
    project_row(conn, project_id)
    may_mint(conn, actor, project_id)
    key = throttle.service_key(conn, KEY_NAME)
    assert key is not None  # made before the read (key_made)
    expires = now + LINK_MS
    body = {"p": project_id, "by": actor.principal_id, "exp": expires}
    payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode())
    token = f"{payload}.{_mac(key, payload)}"
    return {"url": public_origin + PATH + token, "expires_at": rfc3339(expires)}


def _still_allowed(conn: Connection, principal_id: str, project_id: str) -> bool:
    who = fetch_row(conn, Principal, principal_id)
    if who is None or who.disabled_at is not None:
        return False
    if who.kind == PrincipalKind.AGENT:
        return projects.digest_sender(conn, project_id) == principal_id
    return who.role == "admin" or grants.role_in(conn, principal_id, project_id) is not None


def check(conn: Connection, token: str, now: int) -> tuple[str, str]:
    """The (project id, minting principal id) of a good link; BadLink otherwise."""
    payload, _dot, mac = token.partition(".")
    key = throttle.service_key(conn, KEY_NAME)
    if not mac or key is None or len(token) > 1000:
        raise BadLink("this link is not a digest link")
    if not mac.isascii() or not hmac.compare_digest(mac, _mac(key, payload)):
        raise BadLink("this link is not a digest link")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    project_id, principal_id, expires = str(body["p"]), str(body["by"]), int(body["exp"])
    if now >= expires:
        raise BadLink("this link has expired (links work for 7 days)")
    if not _still_allowed(conn, principal_id, project_id):
        raise BadLink("this link no longer works (its sender lost the project)")
    try:
        project_row(conn, project_id)
    except CoordinatorError:
        raise BadLink("this link no longer works (its project is gone)") from None
    return project_id, principal_id


def view(conn: Connection, token: str, now: int) -> JsonObject:
    """What the link's page shows (nothing is recorded)."""
    project_id, _by = check(conn, token, now)
    project = project_row(conn, project_id)
    return {"project": {"id": project.id, "name": project.name}}


def record(conn: Connection, token: str, now: int) -> JsonObject:
    """Press *I read this*: the read is recorded under the principal that minted the link."""
    project_id, principal_id = check(conn, token, now)
    attention.record_read(conn, now, project_id, principal_id, "link")
    project = project_row(conn, project_id)
    return {"project": {"id": project.id, "name": project.name}}
