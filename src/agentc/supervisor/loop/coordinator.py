"""The loop's side of the coordinator, through the agent CLI's own library (:mod:`agentc.client`).

Who may renew (service/work/leases.py ``owned_attempt``): only the coordinator session that
claimed the attempt, with the same principal. So, per launch, the loop opens a fresh coordinator
session named after the launch in a private client state directory
(``<state>/loop/sessions/<launch>/``, masked in every launch), claims the task and registers the
worktree there, and mints a credential bound to the attempt. Only that credential and the
session's state without its proof (``sessions/<launch>.json``: session id, attempt, worktree,
``bound``) go into the run's ``state/coordinator``, where the agent CLI inside the launch finds
them (``AGENT_COORDINATOR_STATE_DIR``, ``AGENT_COORDINATOR_SESSION``): the role's own credential
never enters a launch. The attempt credential acts in the attempt's session, only for that
attempt's own requests and only while the attempt is active; the loop revokes it when the
launch ends. The loop renews and releases from its private copy and never reads the launch's:
whatever the launch writes there changes nothing the loop decides. The copies' journals are
independent (each mutation has its own Idempotency-Key), and the attempt's state is always read
back from the coordinator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.client import reads
from agentc.client.config import CREDENTIALS_FILE, Options, credential_text, resolve
from agentc.client.errors import MutationPending, TransportFailure
from agentc.client.ops import Agent
from agentc.client.state import Store
from agentc.core import model_policy, secrets
from agentc.core.errors import CoordinatorError, SupervisorError
from agentc.core.model_policy import ModelPolicy
from agentc.files import read_private, write_atomic
from agentc.files.toml import dump_toml

# Refusals that end an attempt for good (the loop stops renewing and settles it).
FINAL_CODES = frozenset({"lease_expired", "operation_not_permitted", "record_not_found"})
# The coordinator refused text carrying a secret (docs/api.md): the loop's texts quote agent
# output (log tails, a reviewer's verdict), so it sends them again with that output left out.
SECRET_REFUSED = secrets.REFUSED
CREDENTIAL_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Binding:
    """The loop's binding: its root-owned copy (``<state>/loop/coordinator-binding.toml``), the
    credential file it reads, and whether plain http to loopback is allowed."""

    repo_config: Path
    credential_file: Path
    project_id: str
    project_name: str | None
    allow_insecure_loopback: bool


def install_binding(
    path: Path, service_url: str, project_id: str, project_name: str | None
) -> None:
    binding = {"service_url": service_url, "project_id": project_id}
    if project_name:
        binding["project_name"] = project_name
    write_atomic(path, dump_toml({(): binding}), mode=0o644)


def _config_dir(root: Path, binding: Binding) -> Path:
    return root / binding.project_name / "config" if binding.project_name else root


def agent(binding: Binding, root: Path, session: str) -> Agent:
    """The client for ``session`` with state under ``root`` (no environment is read)."""
    settings = resolve(
        Options(
            state_dir=str(root),
            repo_config=str(binding.repo_config),
            session=session,
            allow_insecure_loopback=binding.allow_insecure_loopback,
        ),
        env={},
        cwd=Path("/"),
    )
    return Agent(settings)


@contextmanager
def session_client(binding: Binding, root: Path, session: str) -> Iterator[Agent]:
    """A private coordinator state at ``root`` holding a copy of the credential; its client."""
    target = _config_dir(root, binding)
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    cred = target / CREDENTIALS_FILE
    if not cred.exists():
        data = read_private(binding.credential_file, max_bytes=CREDENTIAL_MAX_BYTES)
        write_atomic(cred, data, mode=0o600)
    client = agent(binding, root, session)
    try:
        yield client
    finally:
        client.close()


def hand_over(client: Agent, binding: Binding, run_state: Path, session: str, token: str) -> None:
    """The launch's ``state/coordinator``: the attempt credential ``token`` (never the role's)
    and ``client``'s session state without its proof, marked bound (the credential carries the
    session), with no pending mutation."""
    target = _config_dir(run_state, binding)
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(
        target / CREDENTIALS_FILE, credential_text(client.settings.origin, token), mode=0o600
    )
    launch = dataclasses.replace(client.state(), proof=None, bound=True, pending=None)
    Store(target, session).save(launch)


def mint_launch_credential(client: Agent, attempt_id: str, generation: int) -> str:
    """A credential bound to the attempt, for its launch (the token)."""
    resolve_pending(client)
    return client.mint_attempt_credential(attempt_id, generation)


def revoke_launch_credentials(client: Agent, attempt_id: str, generation: int) -> None:
    """The launch's credentials stop working now, whatever the attempt's state (a launch that
    is gone leaves none usable); an attempt the coordinator no longer has needs nothing."""
    try:
        resolve_pending(client)
        client.revoke_attempt_credentials(attempt_id, generation)
    except CoordinatorError as exc:
        if exc.code != "record_not_found":
            raise


def task_attempt_state(client: Agent, attempt_id: str) -> str | None:
    """The attempt's state on the coordinator (``active``, ``submitted``, ``released``...); None
    when the coordinator has no such attempt. A coordinator that cannot answer raises."""
    try:
        return reads.attempt_state(client, attempt_id)
    except CoordinatorError as exc:
        if exc.code == "record_not_found":
            return None
        raise


def task_model_policy(client: Agent, task_id: str) -> ModelPolicy:
    """The task's effective model policy (decision D47), handed to the gateway with the
    launch's sentinel. A coordinator that cannot answer raises: no launch without its policy."""
    effective = reads.model_policy(client, task_id)
    try:
        return model_policy.from_wire(effective)
    except ValueError as exc:
        raise SupervisorError(f"task {task_id}: the coordinator's model policy: {exc}") from None


def resolve_pending(client: Agent) -> None:
    """Resend a journaled mutation left without an answer (a lost answer is never redone)."""
    client.retry()


# What the coordinator answers when the agent text a body quotes is refused: a secret in it,
# or text it does not take (a 422 naming a field, a body over the size limit). The loop then
# sends the same record without that text, saying why, rather than losing the record.
TEXT_REFUSALS = frozenset({SECRET_REFUSED, "invalid_input", "payload_too_large"})


def text_refused(exc: CoordinatorError) -> bool:
    """Whether ``exc`` refuses the agent text a body carried (see :data:`TEXT_REFUSALS`)."""
    return exc.code in TEXT_REFUSALS or exc.status == 413


def renew(
    client: Agent,
    attempt_id: str,
    generation: int,
    step: str | None = None,
    spent_usd: float | None = None,
    spent_tokens: int | None = None,
) -> dict[str, Any]:
    """Renew, telling the current ``step`` and what the launch spent so far; a step the
    coordinator refuses (a secret, text it does not take) is left out: the renewal is what
    matters."""
    resolve_pending(client)
    try:
        data: dict[str, Any] = client.renew(
            attempt_id, generation, step, spent_usd, spent_tokens
        ).data
    except CoordinatorError as exc:
        if step is None or not text_refused(exc):
            raise
        data = client.renew(attempt_id, generation, None, spent_usd, spent_tokens).data
    return data


def secret_left_out(exc: CoordinatorError, what: str) -> str:
    """The note that replaces ``what`` (a text quoting agent output) when the coordinator
    refused it: for a secret, which field, what kind of secret and how it was encoded, never
    the secret (the refusal names none); otherwise the refusal's own words."""
    kept = "it stays in the launch's logs on the supervisor's host"
    if exc.code != SECRET_REFUSED:
        return (
            f"agentc-supervisor: {what} left out, refused ({exc.code}: {exc.message[:300]}); {kept}"
        )
    return "agentc-supervisor: " + secrets.left_out(exc.details, what, "the launch's output", kept)


def without_secrets(send: Callable[[str], object], text: str, what: str) -> None:
    """``send(text)``; when the coordinator refuses it for a secret, ``send`` the note that
    says so instead (any other refusal is raised)."""
    try:
        send(text)
    except CoordinatorError as exc:
        if exc.code != SECRET_REFUSED:
            raise
        send(secret_left_out(exc, what))


def release(client: Agent, attempt_id: str, generation: int, handoff: str) -> str:
    """Release with a handoff; returns what happened (``released`` or why it was not needed).
    A handoff the coordinator refuses for a secret is replaced by a note saying so."""

    def send(text: str) -> None:
        client.release(text[:4000], attempt_id=attempt_id, generation=generation)

    try:
        resolve_pending(client)
        without_secrets(send, handoff, "handoff")
    except CoordinatorError as exc:
        if exc.code in FINAL_CODES:
            state = task_attempt_state(client, attempt_id)
            return f"not released: the attempt is {state or 'gone'} ({exc.code})"
        raise
    return "released"


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` says nothing about the request itself: the coordinator could not be
    reached or gave no answer, a journaled request is still pending, or it said to retry
    (503). Such a failure is tried again however often; only a refusal may be given up on."""
    if isinstance(exc, TransportFailure | MutationPending):
        return True
    return isinstance(exc, CoordinatorError) and exc.retryable


def describe_error(exc: BaseException) -> str:
    """One bounded line for the log and the heartbeat."""
    if isinstance(exc, CoordinatorError):
        text = f"{exc.code}: {exc.message}"
    elif isinstance(exc, TransportFailure):
        text = f"transport: {exc}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]
