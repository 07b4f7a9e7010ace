"""Submitting the held attempt's work, and the attempt's local checkout (a git worktree)
registered with the coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentc.client import worktree
from agentc.client.candidates import publish
from agentc.client.errors import LocalConflict
from agentc.client.journal import Learner, Outcome, no_session, unresolved
from agentc.client.leases import Leases, ended
from agentc.client.state import Pending, State
from agentc.core.errors import ConfigError
from agentc.core.model import CANDIDATE_REF_PREFIX, TaskKind
from agentc.core.rules import check_id


class Submissions(Leases):
    def submit(
        self,
        kind: TaskKind,
        body: dict[str, Any],
        *,
        attempt_id: str | None = None,
        generation: int | None = None,
        checkout: str | None = None,
        push: str | None = None,
    ) -> Outcome:
        aid, gen = self.held(attempt_id, generation)
        body = {**body, "kind": kind, "generation": body.get("generation", gen)}
        if kind == TaskKind.CODE:
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
        helper = self.settings.push_socket if push is None else None
        if helper is None:
            body.setdefault("candidate_ref", CANDIDATE_REF_PREFIX + attempt_id)
        if "candidate_ref" in body and not str(body["candidate_ref"]).startswith(
            CANDIDATE_REF_PREFIX
        ):
            raise ConfigError(f"candidate_ref must start with {CANDIDATE_REF_PREFIX}")
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
        elif helper is not None and "candidate_ref" not in body:
            if path is None:
                raise ConfigError("publishing the candidate needs a checkout (--checkout)")
            body["candidate_ref"] = publish(helper, "candidate", body["candidate_revision"], path)
        return body

    def registered_checkout(self, attempt_id: str) -> dict[str, Any] | None:
        """The checkout the coordinator has on record for the attempt, if any."""
        detail = self.get(self.project(f"/attempts/{check_id('attempt id', attempt_id)}"))
        checkout = detail.get("checkout") if isinstance(detail, dict) else None
        return checkout if isinstance(checkout, dict) else None

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
        if not self.state().has_session():
            raise no_session()
        aid, generation = self.held(attempt_id, None)
        target = path or str(self.settings.state_dir / "worktrees" / aid)
        with self.store.locked():
            st = self.state()
            if st.pending is not None:
                raise unresolved(st.pending)
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


def _registered(st: State, pending: Pending, data: Any) -> Any:
    """The coordinator accepted the worktree as the attempt's checkout."""
    if isinstance(data, dict):
        for aid, record in st.worktrees.items():
            if pending.path.endswith(f"/attempts/{aid}/checkout"):
                record["registered"] = True
                record["checkout"] = data.get("checkout")
    return data


LEARNERS: dict[str, Learner] = {"submit": ended, "checkout": _registered}
