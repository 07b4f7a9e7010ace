"""The agent workflow as operations, shared by the CLI and the MCP adapter.

Every mutation goes through `Agent.mutate`: under the session lock it refuses to start while an
earlier mutation is unresolved, journals the exact request with a new Idempotency-Key (fsynced),
sends it, and only a definitive answer clears the journal; what the answer teaches (the session
proof, the claimed attempt, the claimed review) is saved in the same atomic write. `retry`
resends the journaled request byte for byte with its key, so a lost answer is recovered from
the coordinator's receipt instead of being done twice.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
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
    ) -> Outcome:
        """Journal, send and resolve one mutation. `session`: required, optional or none."""
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
                pending.method, pending.path, pending.body, key=pending.key, session=creds
            )
        except CoordinatorError as refusal:  # definitive: the request did not happen
            st.pending = None
            self.store.save(st)
            raise refusal
        # TransportFailure propagates with the journal still pending.
        st.pending = None
        data = _learn(st, pending, answer)
        self.store.save(st)
        if data is _LOST_PROOF:
            raise CoordinatorError(
                "session_proof_lost",
                "the session was opened but its answer (with the only copy of the proof) was "
                "lost; that session cannot be used: run `agent-coordinator connect` again",
                status=409,
            )
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
        body: dict[str, Any] = {"harness": harness, "capabilities": list(capabilities)}
        if workstation:
            body["workstation_id"] = workstation
        return self.mutate("connect", "POST", "/api/v1/sessions", body, session="none")

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
        """The attempt to act on: the one given, or the one this session claimed last."""
        if attempt_id is not None:
            check_id(attempt_id, "attempt id")
            if generation is None:
                generation = int(
                    self.get(self.project(f"/attempts/{attempt_id}"))["attempt"]["generation"]
                )
            return attempt_id, generation
        held = self.state().attempt
        if held is None:
            raise ConfigError("no attempt is held by this session: run `claim`, or pass --attempt")
        return str(held["id"]), int(generation if generation is not None else held["generation"])

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
        """Fill the candidate ref and revisions from the prepared worktree (and push it)."""
        prepared = self.state().worktrees.get(attempt_id, {})
        path = checkout or prepared.get("path")
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
            base = prepared.get("base_revision")
            if base is None:
                raise ConfigError("base_revision: not in the input and no worktree was prepared")
            body["base_revision"] = base
        if push is not None:
            if path is None:
                raise ConfigError("--push needs a checkout (--checkout or a prepared worktree)")
            worktree.push_candidate(path, push, body["candidate_revision"], body["candidate_ref"])
        return body

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
        st = self.state()
        if attempt_id is None and st.attempt is None:
            raise ConfigError("no attempt is held by this session: run `claim`, or pass --attempt")
        aid = check_id(attempt_id, "attempt id") if attempt_id else str(st.attempt["id"])  # type: ignore[index]
        if st.session_id is None:
            raise SetupRequired("no agent session: run `agent-coordinator connect` first")
        target = path or str(self.settings.state_dir / "worktrees" / aid)
        with self.store.locked():
            st = self.state()
            if aid in st.worktrees:
                where = st.worktrees[aid]["path"]
                raise LocalConflict(f"a worktree was already prepared for attempt {aid} at {where}")
            record = worktree.add(source, target, f"agentc/{st.session_id}", base)
            record["attempt_id"] = aid
            record["registered"] = False
            st.worktrees[aid] = record
            self.store.save(st)
        return record


_LOST_PROOF = object()


def _learn(st: State, pending: Pending, answer: Answer) -> Any:
    """Update the session state from a definitive success; returns what to show."""
    data = answer.data
    if pending.op == "connect":
        if data.get("secret_unavailable") or not data.get("proof"):
            return _LOST_PROOF
        st.session_id, st.proof = data["session_id"], data["proof"]
        st.agent, st.harness = data.get("agent"), data.get("harness")
        st.attempt = st.review = None
        return {k: v for k, v in data.items() if k != "proof"}
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
