"""Tasks and leases: what to do next, the task list, claiming a task, and the held attempt's
renewals, checkpoints and release."""

from __future__ import annotations

from typing import Any

import httpx

from agentc.client.candidates import publish
from agentc.client.journal import Journal, Learner, Outcome, ends_hold
from agentc.client.state import Pending, State
from agentc.core.errors import ConfigError
from agentc.core.model import Role
from agentc.core.rules import check_id


class Leases(Journal):
    def next(self, role: Role = Role.IMPLEMENTER) -> Any:
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
        return self.get(self.project(f"/tasks/{check_id('task id', task_id)}"))

    def tasks_create(self, body: Any) -> Outcome:
        return self.mutate("task_create", "POST", self.project("/tasks"), body, session="optional")

    def claim(self, task_id: str | None = None, revision: int | None = None) -> Outcome:
        body: dict[str, Any] = {}
        if task_id is not None:
            check_id("task id", task_id)
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
            check_id("attempt id", attempt_id)
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
        if not st.has_session():
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

    def renew(
        self,
        attempt_id: str | None = None,
        generation: int | None = None,
        step: str | None = None,
        spent_usd: float | None = None,
        spent_tokens: int | None = None,
    ) -> Outcome:
        """Renew the lease; ``step``: what the agent is doing now, ``spent_usd`` and
        ``spent_tokens``: what its model calls cost and took so far (its supervisor's
        reading of each)."""
        aid, gen = self.held(attempt_id, generation)
        body: dict[str, object] = {"generation": gen}
        if step is not None:
            body["step"] = step[:300]
        if spent_usd is not None:
            body["spent_usd"] = round(spent_usd, 6)
        if spent_tokens is not None:
            body["spent_tokens"] = spent_tokens
        return self.mutate("renew", "POST", self.project(f"/attempts/{aid}/renew"), body)

    def checkpoint(
        self,
        summary: str,
        *,
        attempt_id: str | None = None,
        generation: int | None = None,
        push_wip: str | None = None,
        **notes: str | None,
    ) -> Outcome:
        """Record progress; `notes` are the checkpoint's other fields (handoff, current_action,
        next_step, revision), each sent unless None. ``push_wip`` names the checkout whose
        ``revision`` is first published as a WIP ref through the candidate push helper."""
        aid, gen = self.held(attempt_id, generation)
        body: dict[str, Any] = {"generation": gen, "summary": summary}
        body.update((name, value) for name, value in notes.items() if value is not None)
        if push_wip is not None:
            self._push_wip(body.get("revision"), push_wip)
        return self.mutate("checkpoint", "POST", self.project(f"/attempts/{aid}/checkpoints"), body)

    def _push_wip(self, revision: str | None, checkout: str) -> None:
        """Publish the checkpoint's revision as a create-only WIP ref through the push helper."""
        if revision is None:
            raise ConfigError("--push-wip needs --revision (the commit to publish)")
        if self.settings.push_socket is None:
            raise ConfigError(
                "--push-wip needs the candidate push helper "
                "(AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET is not set)"
            )
        publish(self.settings.push_socket, "wip", revision, checkout)

    def mint_attempt_credential(self, attempt_id: str, generation: int) -> str:
        """A credential bound to this session's attempt, for the launch working on it: its
        token. The coordinator shows a token once, so a replayed answer (a lost answer
        recovered) holds none and a new one is minted."""
        path = self.project(f"/attempts/{check_id('attempt id', attempt_id)}/credentials")
        for _ in range(2):
            data = self.mutate("attempt_credential", "POST", path, {"generation": generation}).data
            token = data.get("token") if isinstance(data, dict) else None
            if isinstance(token, str) and token:
                return token
        raise ConfigError(f"the coordinator minted no credential for attempt {attempt_id}")

    def revoke_attempt_credentials(self, attempt_id: str, generation: int) -> int:
        """Revoke every credential bound to the attempt (in any state); how many were live."""
        path = self.project(f"/attempts/{check_id('attempt id', attempt_id)}/credentials/revoke")
        data = self.mutate("attempt_credential", "POST", path, {"generation": generation}).data
        return int(data.get("revoked", 0)) if isinstance(data, dict) else 0

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


def _claimed(st: State, _pending: Pending, data: Any) -> Any:
    if isinstance(data, dict) and data.get("claim"):
        att = data["claim"]["attempt"]
        st.attempt = {
            "id": att["id"],
            "task_id": att["task_id"],
            "generation": att["generation"],
            "expires_at": att.get("expires_at"),
        }
    return data


def _renewed(st: State, _pending: Pending, data: Any) -> Any:
    if st.attempt is not None:
        att = data.get("attempt", {})
        if att.get("id") == st.attempt["id"]:
            st.attempt["expires_at"] = att.get("expires_at")
    return data


# The held attempt was released or submitted: it is held no more.
ended = ends_hold("attempt", "attempts", "id")


LEARNERS: dict[str, Learner] = {
    "claim": _claimed,
    "renew": _renewed,
    "checkpoint": _renewed,
    "release": ended,
}
