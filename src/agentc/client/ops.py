"""The agent workflow as operations, shared by the CLI and the MCP adapter.

`Agent` is one agent session of one coordinator, as seen from this machine. Its operations come
by family: the session (`sessions`), tasks and leases (`leases`), submissions and the attempt's
checkout (`submissions`) and reviews (`reviews`), each a layer over the mutation journal
(`journal`), which every mutation goes through and which each family teaches what its answers
mean for the local state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from agentc.client import leases, reviews, sessions, submissions
from agentc.client.journal import Learner, Outcome
from agentc.client.transport import check_path
from agentc.core.errors import ConfigError


class Agent(sessions.Sessions, submissions.Submissions, reviews.Reviews):
    """Every operation of the agent workflow, and the raw API call."""

    learners: ClassVar[Mapping[str, Learner]] = {
        **sessions.LEARNERS,
        **leases.LEARNERS,
        **submissions.LEARNERS,
        **reviews.LEARNERS,
    }

    def request(self, method: str, path: str, body: Any = None) -> Outcome:
        method = method.upper()
        check_path(path)
        if method == "GET":
            if body is not None:
                raise ConfigError("GET requests carry no --input")
            return Outcome(self.get(path))
        return self.mutate("request", method, path, body, session="optional")
