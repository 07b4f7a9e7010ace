"""An operation's shapes, free of the web framework: what it returns (`Result`), its context
inside the transaction (`Op`, `Runtime`) and new record ids. The host commands of
`agent-coordinator-server` run operations with these without importing FastAPI."""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agentc.service.auth import Actor
from agentc.service.hosts import Hosts
from agentc.service.limiter import LoginLimiter
from agentc.service.settings import ServerSettings
from agentc.store.audit import write_event
from agentc.store.tx import Executor, Tx

JsonObject = dict[str, Any]
"""A JSON document the API sends (values of any JSON type: Any)."""


@dataclass
class Result:
    """What an operation returns: its data, status, and fields to keep out of the receipt."""

    data: JsonObject
    status: int = 200
    secret_fields: tuple[str, ...] = ()


@dataclass
class Runtime:
    settings: ServerSettings
    executor: Executor
    limiter: LoginLimiter = field(default_factory=LoginLimiter)

    @cached_property
    def hosts(self) -> Hosts:
        """The names requests come under (the console's own, loopback, any other)."""
        return Hosts(self.settings.public_origin)


class Op:
    """A mutation's context inside its transaction: the actor, the time, the event writer."""

    def __init__(
        self, tx: Tx, actor: Actor, runtime: Runtime, client_proof: str | None = None
    ) -> None:
        self.client_proof = client_proof
        self.tx = tx
        self.conn = tx.conn
        self.actor = actor
        self.runtime = runtime

    @property
    def now(self) -> int:
        return self.tx.now

    def event(
        self, kind: str, project_id: str | None, record_id: str | None, **data: object
    ) -> None:
        write_event(
            self.conn,
            self.tx.now,
            self.actor.principal_id,
            self.actor.credential_class,
            kind,
            project_id,
            record_id,
            data,
        )


# Record and request ids need to be unique, not secret (authority comes from tokens and
# proofs): a random generator seeded once from the OS avoids a getrandom syscall per id.
_ids = random.Random(os.urandom(32))


def _reseed_ids() -> None:
    _ids.seed(os.urandom(32))


# A forked process (`serve --workers N`) would otherwise draw the very same ids as its siblings.
os.register_at_fork(after_in_child=_reseed_ids)


def new_id() -> str:
    """A random (version 4) UUID."""
    return str(uuid.UUID(int=_ids.getrandbits(128), version=4))
