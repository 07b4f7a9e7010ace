"""Reviews: claiming the next review (or a named one), deciding or releasing the held review."""

from __future__ import annotations

from typing import Any

from agentc.client.journal import Learner, Outcome, ends_hold
from agentc.client.leases import Leases
from agentc.client.state import Pending, State
from agentc.core.errors import ConfigError
from agentc.core.model import Role
from agentc.core.rules import check_id


class Reviews(Leases):
    def review_claim(
        self, activity_id: str | None = None, submission_id: str | None = None
    ) -> Outcome:
        if activity_id is None:
            nxt = self.next(Role.REVIEWER)
            action = nxt.get("action")
            if action is None:
                return Outcome({"review": None, "reasons": ["no review is waiting for you"], **nxt})
            activity_id, submission_id = action["activity_id"], action["submission_id"]
        check_id("activity id", activity_id)
        if submission_id is None:
            raise ConfigError("--submission goes with --activity (the submission under review)")
        path = self.project(f"/workflow-activities/{activity_id}/claim")
        return self.mutate("review_claim", "POST", path, {"expected_submission_id": submission_id})

    def review_decide(self, body: dict[str, Any], activity_id: str | None = None) -> Outcome:
        held, activity_id = self._held_review(activity_id)
        if held is not None and held.get("activity_id") == activity_id:
            body = {
                "generation": held["generation"],
                "submission_id": held["submission_id"],
                **body,
            }
        path = self.project(f"/workflow-activities/{activity_id}/review")
        return self.mutate("review_decide", "POST", path, body)

    def review_release(
        self, summary: str, activity_id: str | None = None, generation: int | None = None
    ) -> Outcome:
        """Give the held review back to the queue undecided, saying why."""
        held, activity_id = self._held_review(activity_id)
        if generation is None:
            if held is None or held.get("activity_id") != activity_id:
                raise ConfigError("--generation goes with an activity this session does not hold")
            generation = int(held["generation"])
        path = self.project(f"/workflow-activities/{activity_id}/release")
        body = {"generation": generation, "summary": summary}
        return self.mutate("review_release", "POST", path, body)

    def _held_review(self, activity_id: str | None) -> tuple[dict[str, Any] | None, str]:
        held = self.state().review
        if activity_id is None:
            if held is None:
                raise ConfigError("no review is held by this session: run `reviews claim`")
            activity_id = str(held["activity_id"])
        check_id("activity id", activity_id)
        return held, activity_id


def _claimed(st: State, _pending: Pending, data: Any) -> Any:
    st.review = {
        "activity_id": data["activity"]["id"],
        "attempt_id": data["attempt"]["id"],
        "generation": data["attempt"]["generation"],
        "submission_id": data["submission"]["id"],
        "task_id": data["task"]["id"],
    }
    return data


# The held review was decided or released: it is held no more.
_decided = ends_hold("review", "workflow-activities", "activity_id")


LEARNERS: dict[str, Learner] = {
    "review_claim": _claimed,
    "review_decide": _decided,
    "review_release": _decided,
}
