"""The agent workflow as operations, shared by the CLI and the MCP adapter.

Every mutation goes through `Agent.mutate`: under the session lock it refuses to start while an
earlier mutation is unresolved, journals the exact request with a new Idempotency-Key (fsynced),
sends it, and only a definitive answer clears the journal; what the answer teaches (the opened
session, the claimed attempt, the claimed review, the registered checkout) is saved in the same
atomic write. `retry` resends the journaled request byte for byte with its key, so a lost answer
is recovered from the coordinator's receipt instead of being done twice.

`connect` makes the session id and its proof here (the proof is 32 random bytes as hex, sent
alone in `X-Coordinator-Session-Proof`) and journals both before the request leaves, so even a
lost answer to `connect` loses nothing: `retry` replays it and the same session is stored.
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agentc.client import worktree
from agentc.client.config import ID, Settings
from agentc.client.errors import LocalConflict, MutationPending, SetupRequired
from agentc.client.state import Pending, State, Store
from agentc.client.transport import Answer, Transport, check_path
from agentc.core.errors import ConfigError, CoordinatorError

DEFAULT_HARNESS = "agent-coordinator-cli"
CANDIDATE_PREFIX = "refs/agent-coordinator/candidates/"


@dataclass(frozen=True)
class Outcome:
    """A mutation's data, and whether the coordinator replayed a stored answer."""

    data: Any
    replayed: bool = False
    request: Pending | None = None


def check_id(value: str, what: str) -> str:
    if not ID.match(value):
        raise ConfigError(f"{what} {value!r} is not a valid id")
    return value


class Agent:
    """One agent session of one coordinator, as seen from this machine."""

    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self.store = Store(settings.state_dir, settings.session_name)
        self.http = Transport(settings.origin, settings.token, transport)
        # An Idempotency-Key chosen by the caller (the MCP adapter) for the next mutation.
        self.key: str | None = None

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------------------

    def project(self, suffix: str = "") -> str:
        return f"/api/v1/projects/{self.settings.project_id}{suffix}"

    def state(self) -> State:
        return self.store.load(self.settings.origin)

    def get(self, path: str, *, with_session: bool = True) -> Any:
        self.settings.require_token()
        session = self.state().session() if with_session else None
        return self.http.send("GET", path, session=session).data

    def mutate(
        self,
        op: str,
        method: str,
        path: str,
        body: Any,
        *,
        session: str = "required",
        key: str | None = None,
        session_proof: str | None = None,
    ) -> Outcome:
        """Journal, send and resolve one mutation. `session`: required, optional or none.
        `session_proof`: a client-made proof sent alone (opening a session)."""
        self.settings.require_token()
        check_path(path)
        key = key or self.key
        with self.store.locked():
            st = self.state()
            if st.pending is not None:
                if key is not None and key == st.pending.key:
                    if (st.pending.method, st.pending.path, st.pending.body) != (
                        method,
                        path,
                        body,
                    ):
                        raise ConfigError(
                            f"Idempotency-Key {key} was journaled for another request "
                            f"({st.pending.describe()}); use a new key for a new request"
                        )
                    return self._deliver(st)
                raise MutationPending(
                    f"an earlier mutation is unresolved: {st.pending.describe()}; run "
                    "`agent-coordinator retry` to resend it with the same key before anything else"
                )
            creds = st.session()
            if session == "required" and creds is None:
                raise SetupRequired("no agent session: run `agent-coordinator connect` first")
            st.pending = Pending(
                op=op,
                method=method,
                path=path,
                body=body,
                key=key or str(uuid.uuid4()),
                with_session=creds is not None and session != "none",
                created_at=time.time(),
                session_proof=session_proof,
            )
            self.store.save(st)
            return self._deliver(st)

    def _deliver(self, st: State) -> Outcome:
        pending = st.pending
        assert pending is not None
        creds = st.session() if pending.with_session else None
        if pending.with_session and creds is None:
            raise SetupRequired("the journaled request needs the session, which is gone")
        try:
            answer = self.http.send(
                pending.method,
                pending.path,
                pending.body,
                key=pending.key,
                session=creds,
                lone_proof=pending.session_proof,
            )
        except CoordinatorError as refusal:  # definitive: the request did not happen
            st.pending = None
            self.store.save(st)
            raise refusal
        # TransportFailure propagates with the journal still pending.
        st.pending = None
        try:
            data = _learn(st, pending, answer)
        finally:
            self.store.save(st)
        return Outcome(data, answer.replayed, pending)

    def retry(self) -> Outcome | None:
        """Resend the journaled mutation exactly; None when nothing is pending."""
        self.settings.require_token()
        with self.store.locked():
            st = self.state()
            if st.pending is None:
                return None
            return self._deliver(st)

    def status(self) -> dict[str, Any]:
        st = self.state()
        return {
            "origin": self.settings.origin,
            "project_id": self.settings.project_id,
            "session_name": self.store.name,
            "state_file": str(self.store.path),
            "session_id": st.session_id,
            "agent": st.agent,
            "harness": st.harness,
            "workstation_id": st.workstation_id,
            "token_source": self.settings.token_source if self.settings.token else None,
            "pending": None
            if st.pending is None
            else {
                "op": st.pending.op,
                "method": st.pending.method,
                "path": st.pending.path,
                "idempotency_key": st.pending.key,
            },
            "attempt": st.attempt,
            "review": st.review,
            "worktrees": st.worktrees,
        }

    # -- sessions ---------------------------------------------------------------------------

    def connect(
        self,
        harness: str = DEFAULT_HARNESS,
        workstation: str | None = None,
        capabilities: tuple[str, ...] = (),
        new: bool = False,
    ) -> Outcome:
        st = self.state()
        if st.session_id and not new:
            view = self.get(f"/api/v1/sessions/{st.session_id}")
            if view.get("closed_at"):
                raise SetupRequired(
                    f"the stored session {st.session_id} is closed: run `connect --new`"
                )
            return Outcome({**view, "agent": st.agent, "reused": True})
        # The id and the proof are made here and journaled before the request leaves. A caller
        # resending its own Idempotency-Key (the MCP adapter) gets the journaled id and proof.
        session_id, proof = str(uuid.uuid4()), secrets.token_hex(32)
        pending = st.pending
        if (
            pending is not None
            and pending.op == "connect"
            and self.key == pending.key
            and isinstance(pending.body, dict)
        ):
            session_id = str(pending.body.get("session_id", session_id))
            proof = pending.session_proof or proof
        body: dict[str, Any] = {
            "session_id": session_id,
            "harness": harness,
            "capabilities": list(capabilities),
        }
        if workstation:
            body["workstation_id"] = workstation
        return self.mutate(
            "connect", "POST", "/api/v1/sessions", body, session="none", session_proof=proof
        )

    def session_show(self) -> dict[str, Any]:
        """The coordinator's view of this session, with the attempts it holds."""
        st = self.state()
        if st.session() is None:
            raise SetupRequired("no agent session: run `agent-coordinator connect` first")
        view = self.get(f"/api/v1/sessions/{st.session_id}")
        return {**view, "agent": st.agent, "local_attempt": st.attempt}

    # -- reads ------------------------------------------------------------------------------

    def next(self, role: str = "implementer") -> Any:
        return self.get(self.project(f"/next?role={role}"))

    def tasks_list(
        self, limit: int = 50, cursor: str | None = None, status: str | None = None
    ) -> Any:
        params = httpx.QueryParams({"limit": limit})
        if cursor:
            params = params.set("cursor", cursor)
        if status:
            params = params.set("work_status", status)
        return self.get(self.project(f"/tasks?{params}"))

    def task_show(self, task_id: str) -> Any:
        return self.get(self.project(f"/tasks/{check_id(task_id, 'task id')}"))

    # -- tasks and leases -------------------------------------------------------------------

    def tasks_create(self, body: Any) -> Outcome:
        return self.mutate("task_create", "POST", self.project("/tasks"), body, session="optional")

    def claim(self, task_id: str | None = None, revision: int | None = None) -> Outcome:
        body: dict[str, Any] = {}
        if task_id is not None:
            check_id(task_id, "task id")
            if revision is None:
                revision = int(self.task_show(task_id)["revision"])
            body = {"task_id": task_id, "expected_task_revision": revision}
        elif revision is not None:
            raise ConfigError("--revision goes with --task")
        return self.mutate("claim", "POST", self.project("/claims"), body)

    def held(self, attempt_id: str | None, generation: int | None) -> tuple[str, int]:
        """The attempt to act on: the one given, the one this session claimed last, or else the
        one the coordinator says this session holds in this project."""
        if attempt_id is not None:
            check_id(attempt_id, "attempt id")
            if generation is None:
                generation = int(
                    self.get(self.project(f"/attempts/{attempt_id}"))["attempt"]["generation"]
                )
            return attempt_id, generation
        held = self.state().attempt or self._held_on_server()
        return str(held["id"]), int(generation if generation is not None else held["generation"])

    def _held_on_server(self) -> dict[str, Any]:
        """The one task attempt the coordinator lists as held by this session in this project,
        remembered locally; refuses when there is none or more than one."""
        st = self.state()
        if st.session() is None:
            raise ConfigError("no attempt is held by this session: run `claim`, or pass --attempt")
        view = self.get(f"/api/v1/sessions/{st.session_id}")
        found = [
            h
            for h in view.get("held_attempts") or []
            if isinstance(h, dict)
            and h.get("project_id") == self.settings.project_id
            and h.get("activity_id") is None
        ]
        if not found:
            raise ConfigError(
                "no attempt is held by this session (the coordinator lists none in this "
                "project): run `claim`, or pass --attempt"
            )
        if len(found) > 1:
            ids = ", ".join(str(h.get("attempt_id")) for h in found)
            raise ConfigError(f"this session holds several attempts ({ids}): pass --attempt")
        h = found[0]
        attempt = {
            "id": str(h["attempt_id"]),
            "task_id": h.get("task_id"),
            "generation": int(h["generation"]),
            "expires_at": h.get("expires_at"),
        }
        with self.store.locked():
            st = self.state()
            if st.attempt is None and st.session_id == view.get("session_id"):
                st.attempt = attempt
                self.store.save(st)
        return attempt

    def renew(self, attempt_id: str | None = None, generation: int | None = None) -> Outcome:
        aid, gen = self.held(attempt_id, generation)
        return self.mutate(
            "renew", "POST", self.project(f"/attempts/{aid}/renew"), {"generation": gen}
        )

    def checkpoint(
        self,
        summary: str,
        *,
        handoff: str | None = None,
        current_action: str | None = None,
        next_step: str | None = None,
        revision: str | None = None,
        attempt_id: str | None = None,
        generation: int | None = None,
    ) -> Outcome:
        aid, gen = self.held(attempt_id, generation)
        body: dict[str, Any] = {"generation": gen, "summary": summary}
        for name, value in (
            ("handoff", handoff),
            ("current_action", current_action),
            ("next_step", next_step),
            ("revision", revision),
        ):
            if value is not None:
                body[name] = value
        return self.mutate("checkpoint", "POST", self.project(f"/attempts/{aid}/checkpoints"), body)

    def release(
        self,
        handoff: str,
        blocked: bool = False,
        attempt_id: str | None = None,
        generation: int | None = None,
    ) -> Outcome:
        aid, gen = self.held(attempt_id, generation)
        body = {"generation": gen, "handoff": handoff, "blocked": blocked}
        return self.mutate("release", "POST", self.project(f"/attempts/{aid}/release"), body)

    # -- submissions and reviews ------------------------------------------------------------

    def submit(
        self,
        kind: str,
        body: dict[str, Any],
        *,
        attempt_id: str | None = None,
        generation: int | None = None,
        checkout: str | None = None,
        push: str | None = None,
    ) -> Outcome:
        aid, gen = self.held(attempt_id, generation)
        body = {**body, "kind": kind, "generation": body.get("generation", gen)}
        if kind == "code":
            body = self._code_fields(aid, body, checkout, push)
        return self.mutate("submit", "POST", self.project(f"/attempts/{aid}/submissions"), body)

    def _code_fields(
        self, attempt_id: str, body: dict[str, Any], checkout: str | None, push: str | None
    ) -> dict[str, Any]:
        """Fill the candidate ref and revisions from the prepared worktree and the checkout
        registered with the coordinator (whose base is the one the coordinator accepts), and
        push the candidate when asked."""
        prepared = self.state().worktrees.get(attempt_id, {})
        registered = self.registered_checkout(attempt_id) or {}
        path = checkout or prepared.get("path")
        if path is None and registered.get("path") and Path(registered["path"]).is_dir():
            path = str(registered["path"])
        body.setdefault("candidate_ref", CANDIDATE_PREFIX + attempt_id)
        if not str(body["candidate_ref"]).startswith(CANDIDATE_PREFIX):
            raise ConfigError(f"candidate_ref must start with {CANDIDATE_PREFIX}")
        if "candidate_revision" not in body:
            if path is None:
                raise ConfigError(
                    "candidate_revision: not in the input and no worktree was prepared for this "
                    "attempt (run `worktree prepare` or pass --checkout)"
                )
            body["candidate_revision"] = worktree.rev_parse(path, "HEAD")
        if "base_revision" not in body:
            base = registered.get("base_revision") or prepared.get("base_revision")
            if base is None:
                raise ConfigError(
                    "base_revision: not in the input, and no checkout is registered or prepared "
                    "for this attempt (run `worktree prepare`)"
                )
            body["base_revision"] = base
        if push is not None:
            if path is None:
                raise ConfigError("--push needs a checkout (--checkout or a prepared worktree)")
            worktree.push_candidate(path, push, body["candidate_revision"], body["candidate_ref"])
        return body

    def registered_checkout(self, attempt_id: str) -> dict[str, Any] | None:
        """The checkout the coordinator has on record for the attempt, if any."""
        detail = self.get(self.project(f"/attempts/{check_id(attempt_id, 'attempt id')}"))
        checkout = detail.get("checkout") if isinstance(detail, dict) else None
        return checkout if isinstance(checkout, dict) else None

    def review_claim(
        self, activity_id: str | None = None, submission_id: str | None = None
    ) -> Outcome:
        if activity_id is None:
            nxt = self.next("reviewer")
            action = nxt.get("action")
            if action is None:
                return Outcome({"review": None, "reasons": ["no review is waiting for you"], **nxt})
            activity_id, submission_id = action["activity_id"], action["submission_id"]
        check_id(activity_id, "activity id")
        if submission_id is None:
            raise ConfigError("--submission goes with --activity (the submission under review)")
        path = self.project(f"/workflow-activities/{activity_id}/claim")
        return self.mutate("review_claim", "POST", path, {"expected_submission_id": submission_id})

    def review_decide(self, body: dict[str, Any], activity_id: str | None = None) -> Outcome:
        held = self.state().review
        if activity_id is None:
            if held is None:
                raise ConfigError("no review is held by this session: run `reviews claim`")
            activity_id = str(held["activity_id"])
        check_id(activity_id, "activity id")
        if held is not None and held.get("activity_id") == activity_id:
            body = {
                "generation": held["generation"],
                "submission_id": held["submission_id"],
                **body,
            }
        path = self.project(f"/workflow-activities/{activity_id}/review")
        return self.mutate("review_decide", "POST", path, body)

    # -- generic ----------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None) -> Outcome:
        method = method.upper()
        check_path(path)
        if method == "GET":
            if body is not None:
                raise ConfigError("GET requests carry no --input")
            return Outcome(self.get(path))
        return self.mutate("request", method, path, body, session="optional")

    def prepare_worktree(
        self,
        source: str,
        path: str | None,
        base: str,
        attempt_id: str | None = None,
    ) -> dict[str, Any]:
        """Add the attempt's checkout as a git worktree (recorded locally first), then register
        it with the coordinator. Running it again for an unregistered worktree registers it."""
        self.settings.require_token()
        st = self.state()
        if st.session() is None:
            raise SetupRequired("no agent session: run `agent-coordinator connect` first")
        aid, generation = self.held(attempt_id, None)
        target = path or str(self.settings.state_dir / "worktrees" / aid)
        with self.store.locked():
            st = self.state()
            if st.pending is not None:
                raise MutationPending(
                    f"an earlier mutation is unresolved: {st.pending.describe()}; run "
                    "`agent-coordinator retry` to resend it with the same key before anything else"
                )
            record = st.worktrees.get(aid)
            if record is not None and record.get("registered"):
                where = record["path"]
                raise LocalConflict(f"a worktree was already prepared for attempt {aid} at {where}")
            if record is None:
                record = worktree.add(source, target, f"agentc/{st.session_id}", base)
                record["attempt_id"] = aid
                record["registered"] = False
                st.worktrees[aid] = record
                self.store.save(st)
            workstation = st.workstation_id
        body: dict[str, Any] = {
            "generation": generation,
            "path": record["path"],
            "branch": record["branch"],
            "base_revision": record["base_revision"],
        }
        if workstation:
            body["workstation_id"] = workstation
        out = self.mutate("checkout", "POST", self.project(f"/attempts/{aid}/checkout"), body)
        got: dict[str, Any] = self.state().worktrees.get(aid, record)
        return {**got, "checkout": out.data.get("checkout"), "replayed": out.replayed}


def _learn(st: State, pending: Pending, answer: Answer) -> Any:
    """Update the session state from a definitive success; returns what to show."""
    data = answer.data
    if pending.op == "connect":
        wanted = pending.body.get("session_id") if isinstance(pending.body, dict) else None
        if (
            not isinstance(data, dict)
            or pending.session_proof is None
            or data.get("session_id") != wanted
            or data.get("proof_source", "client") != "client"
        ):
            raise SetupRequired(
                "the coordinator did not open the session with the client-made id and proof "
                "(it may be too old for this client); the session was not stored"
            )
        st.session_id, st.proof = wanted, pending.session_proof
        st.agent, st.harness = data.get("agent"), data.get("harness")
        st.workstation_id = pending.body.get("workstation_id")
        st.attempt = st.review = None
        return {k: v for k, v in data.items() if k != "proof"}
    if pending.op == "checkout" and isinstance(data, dict):
        for aid, record in st.worktrees.items():
            if pending.path.endswith(f"/attempts/{aid}/checkout"):
                record["registered"] = True
                record["checkout"] = data.get("checkout")
    if pending.op == "claim" and isinstance(data, dict) and data.get("claim"):
        att = data["claim"]["attempt"]
        st.attempt = {
            "id": att["id"],
            "task_id": att["task_id"],
            "generation": att["generation"],
            "expires_at": att.get("expires_at"),
        }
    elif pending.op in ("renew", "checkpoint") and st.attempt is not None:
        att = data.get("attempt", {})
        if att.get("id") == st.attempt["id"]:
            st.attempt["expires_at"] = att.get("expires_at")
    elif pending.op in ("release", "submit") and st.attempt is not None:
        if f"/attempts/{st.attempt['id']}/" in pending.path:
            st.attempt = None
    elif pending.op == "review_claim":
        st.review = {
            "activity_id": data["activity"]["id"],
            "attempt_id": data["attempt"]["id"],
            "generation": data["attempt"]["generation"],
            "submission_id": data["submission"]["id"],
            "task_id": data["task"]["id"],
        }
    elif (
        pending.op == "review_decide"
        and st.review is not None
        and f"/workflow-activities/{st.review['activity_id']}/" in pending.path
    ):
        st.review = None
    return data
