"""One project's API under one credential: the paths below ``/api/v1/projects/<project>``.

The programs that read the coordinator for a single project (the attention checks and canary,
the integrator) build their requests from :func:`project_path` and :class:`ProjectApi`, so the
project's id is quoted into the path in one place.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from agentc.client.transport import Transport


def project_path(project_id: str) -> str:
    """The API path of the project ``project_id`` (quoted: it is one path segment)."""
    return f"/api/v1/projects/{quote(project_id, safe='')}"


class ProjectApi:
    """A project's API through ``transport``: ``base`` is its path, :meth:`get` reads below it."""

    def __init__(self, transport: Transport, project_id: str) -> None:
        self.transport = transport
        self.base = project_path(project_id)

    def get(self, path: str) -> Any:
        """The data of ``GET <base><path>``."""
        return self.transport.send("GET", self.base + path).data
