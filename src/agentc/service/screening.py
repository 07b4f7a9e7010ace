"""Agent text carrying a secret is refused before anything of it is kept (docs/api.md,
docs/security.md "Secret scanning").

Every mutation goes through `agentc.service.api.mutation`, which calls :func:`screen` on the
parsed body and the Idempotency-Key before its transaction (the pure scan,
:mod:`agentc.core.secrets`) and :func:`enforce` inside it, after authentication, when the
caller is not a person: a format found is refused at once, and so is the request's own bearer
token or session proof, looked for as it is in every view (glued to anything or not, in any
shape); the verifiers of the token-shaped strings found are looked up in one query among the
coordinator's live secrets (agent credentials, open agent sessions' proofs, live browser
sessions). A refusal names the field,
the kind and the encoding, never the secret; it is raised inside the transaction, so nothing of
the request is stored (no receipt, no audit event), and the service logs nothing of it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from sqlalchemy.engine import Connection

from agentc.core.errors import CoordinatorError
from agentc.core.secrets import REFUSED, SHORTEST, Known, ScanLimit, described, scan
from agentc.service.work.refusals import invalid
from agentc.store.accounts import live_secret

MAX_VERIFIERS = 512  # token-shaped strings (and their reversals) checked per request
_SECRET_MIN = 32  # the shortest secret the service accepts (agentc.core.browser.SECRET)
KINDS = {
    "credential": "an agent credential of this coordinator",
    "agent_session": "an agent session proof of this coordinator",
    "browser_session": "a browser session of this coordinator",
}
# A JSON key is named in a refusal's field only when it is a plain name (an arbitrary key could
# itself be anything); it was scanned before anything under it.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


@dataclass(frozen=True)
class Screened:
    """A request's scan: the refusal it earns from a non-human caller, or the token-shaped
    strings to look up (verifier -> the field and the encoding it was found in)."""

    refusal: CoordinatorError | None = None
    tokens: Mapping[str, tuple[str, str]] = field(default_factory=dict)


CLEAN = Screened()


def refused(where: str, kind: str, encoding: str) -> CoordinatorError:
    return CoordinatorError(
        REFUSED,
        f"{where}: carries {described(kind, encoding)}; nothing of the request was kept: remove "
        "the secret and send the request again",
        status=422,
        details={"field": where, "kind": kind, "encoding": encoding},
    )


def _unscannable(where: str, problem: str) -> CoordinatorError:
    return invalid(where, f"cannot be scanned for secrets: {problem}")


def shown(name: str) -> str:
    """A JSON key as a field path names it: itself when it is a plain name or an index, else
    ``*`` (an arbitrary key could be anything, a secret included)."""
    return name if _NAME.fullmatch(name) or name.isdigit() else "*"


def texts(value: object, where: str = "") -> Iterator[tuple[str, str]]:
    """``(field, text)`` of every string in a JSON value, keys included (a key before what it
    holds), fields named as validation errors name them (``evidence.0.text``)."""
    if isinstance(value, str):
        yield where or "body", value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield (f"{where} (a key)" if where else "a key"), str(key)
            name = shown(str(key))
            yield from texts(item, f"{where}.{name}" if where else name)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from texts(item, f"{where}.{index}" if where else str(index))


def screen(payload: object, key: str, own: Mapping[str, str] | None = None) -> Screened:
    """Scan a mutation's body and Idempotency-Key (pure: before the transaction). ``own``: the
    secrets the request itself presents (its bearer token and session proof) by kind, found
    as they are in every view, glued to anything or not."""
    found: dict[str, tuple[str, str]] = {}
    own = own or {}
    known: Known | None = None
    for where, text in itertools.chain([("Idempotency-Key", key)], texts(payload)):
        if len(text) < SHORTEST:
            continue  # most strings of a request: nothing fits in them
        known = known or Known(own)
        try:
            result = scan(text, known=known)
        except ScanLimit as exc:
            return Screened(_unscannable(where, str(exc)))
        for secret, encoding in result.known.items():
            return Screened(refused(where, own[secret], encoding))
        if result.format is not None:
            return Screened(refused(where, result.format.kind, result.format.encoding))
        for verifier, encoding in result.tokens.items():
            found.setdefault(verifier, (where, encoding))
        if len(found) > MAX_VERIFIERS:
            return Screened(
                _unscannable(
                    where,
                    f"the request holds more than {MAX_VERIFIERS // 2} token-shaped strings "
                    "(64 hex digits); send fewer in one request",
                )
            )
    return Screened(None, found) if found else CLEAN


def presented_secrets(bearer: str | None, proof: str | None) -> dict[str, str]:
    """The secrets a request presents, by the kind a refusal names (too short for a secret:
    left out; a malformed one fails authentication anyway)."""
    own = {bearer: KINDS["credential"], proof: KINDS["agent_session"]}
    return {secret: kind for secret, kind in own.items() if secret and len(secret) >= _SECRET_MIN}


def enforce(conn: Connection, screened: Screened, now: int) -> None:
    """Refuse a non-human caller's request that carries a secret (inside its transaction)."""
    if screened.refusal is not None:
        raise screened.refusal
    if not screened.tokens:
        return
    hit = live_secret(conn, list(screened.tokens), now)
    if hit is not None:
        where, encoding = screened.tokens[hit.verifier]
        raise refused(where, KINDS[hit.kind], encoding)
