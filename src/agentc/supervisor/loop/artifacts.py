"""What the loop records about a settled attempt for the console (decision D45): a code
submission's patch, computed from the mirror (:mod:`.patch`).

Recording is best effort: a failure is logged and the attempt's settling goes on (the console
then shows the submission without its change). A patch whose text the coordinator refuses (a
secret, a body over its size limit) is sent again without the text, the note naming the
refusal (never the secret).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentc.client import reads
from agentc.client.ops import Agent
from agentc.client.reads import Submission
from agentc.core.errors import AgentcError, CoordinatorError
from agentc.supervisor.loop import patch
from agentc.supervisor.loop.coordinator import secret_left_out, text_refused


def submission_of(client: Agent, task_id: str, attempt_id: str) -> Submission | None:
    """The attempt's submission, as the task's workflow shows it (None: it has none)."""
    subs = reads.workflow(client, task_id)["submissions"]
    return next((sub for sub in subs if sub["attempt_id"] == attempt_id), None)


def record_patch(
    client: Agent, mirror: Path, launch_id: str, task_id: str, attempt_id: str, max_kib: int
) -> str:
    """Compute and send the patch of the attempt's code submission; what happened, in words."""
    try:
        sub = submission_of(client, task_id, attempt_id)
        if sub is None or sub["kind"] != "code" or not sub["candidate_ref"]:
            return "no code submission: no patch"
        ref, base, revision = sub["candidate_ref"], sub["base_revision"], sub["candidate_revision"]
        body = patch.compute(mirror, ref, launch_id, str(base), str(revision), max_kib * 1024)
        body["submission_id"] = sub["id"]
        _send(client, attempt_id, body)
    except (AgentcError, OSError, ValueError, KeyError) as exc:  # never stops the settling
        return f"the patch was not recorded: {exc}"
    return f"recorded the patch ({len(body['files'])} files)"


def send(
    client: Agent,
    attempt_id: str,
    kind: str,
    body: dict[str, Any],
    bare: Callable[[str], dict[str, Any]],
) -> str | None:
    """POST the attempt's ``kind`` artifact (``record_<kind>``, ``.../artifacts/<kind>`` with
    ``-`` for ``_``). Refused for a secret: ``bare(note)`` is sent instead and the note
    returned; recorded before: ``"exists"``; else None. Other refusals raise."""
    path = client.project(f"/attempts/{attempt_id}/artifacts/{kind.replace('_', '-')}")
    try:
        client.mutate(f"record_{kind}", "POST", path, body)
    except CoordinatorError as exc:
        if exc.code == "artifact_exists":
            return "exists"
        if not text_refused(exc):
            raise
        note = secret_left_out(exc, f"the {kind.replace('_', ' ')}")[:1000]
        client.mutate(f"record_{kind}", "POST", path, bare(note))
        return note
    return None


def _send(client: Agent, attempt_id: str, body: dict[str, Any]) -> None:
    send(client, attempt_id, "patch", body, lambda note: {**body, "patch": None, "note": note})
