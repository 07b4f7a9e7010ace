"""What an attempt credential may do: the one list of requests a launch's credential is allowed.

A launch holds only a credential minted for its attempt (class ``attempt``,
:mod:`agentc.service.work.launch_access`). Authentication (`agentc.service.auth`) lets such a
credential through only while its attempt is active, its lease live and its session open, and
only for the requests named here, matched exactly by method and path: reading its own task, the
task's workflow, its attempt and its session; checkpointing, submitting and releasing its
attempt. Its cost is the loop's to report (from the model gateway's meter, D28), so a launch
cannot write telemetry that fakes spend or a host's liveness. Everything else is refused before
any route's work runs, whatever the route (a new one is refused until it is added here), so the
list is the whole of a launch's authority over the coordinator. docs/security.md states it in
words; tests/service/test_attempt_credentials.py walks every route of the app against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentc.core.errors import CoordinatorError


@dataclass(frozen=True)
class AttemptScope:
    """The attempt an attempt credential is bound to."""

    project_id: str
    task_id: str
    attempt_id: str
    session_id: str

    def routes(self) -> frozenset[str]:
        """Every request (``METHOD /path``) the credential may make."""
        project = f"/api/v1/projects/{self.project_id}"
        task = f"{project}/tasks/{self.task_id}"
        attempt = f"{project}/attempts/{self.attempt_id}"
        return frozenset(
            {
                f"GET {task}",
                f"GET {task}/workflow",
                f"GET {attempt}",
                f"GET /api/v1/sessions/{self.session_id}",
                f"POST {attempt}/checkpoints",
                f"POST {attempt}/submissions",
                f"POST {attempt}/release",
            }
        )

    def check(self, route: str | None) -> None:
        """Refuse (403) a request outside the scope; ``route`` None (a flow for people, such as
        a password change) is outside it."""
        if route is None or route not in self.routes():
            raise CoordinatorError(
                "operation_not_permitted",
                f"this credential is bound to attempt {self.attempt_id} of task {self.task_id}: "
                "it may read that task and attempt, and checkpoint, submit or release the "
                "attempt, nothing else",
                status=403,
                details={"attempt_id": self.attempt_id},
            )
