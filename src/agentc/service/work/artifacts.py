"""Work artifacts (docs/console.md "The change", decision D45): what an attempt produced, kept
with it so the console can show it.

A code submission's **patch** is recorded by the supervisor that ran the attempt, after the
agent submitted: it computes the diff from the submission's own two revisions (the base and
the candidate the reviewers see and the integrator lands) and sends its file list, its text
(within the supervisor's size cap) and the SHA-256 of ``git diff-tree -r -z --no-renames base
candidate`` (the landing's ``Agentc-Reviewed-Diff``). The coordinator keeps it only when those
revisions are the submission's. Only the attempt's own agent records it, with its role's
*supervised* credential, the one a supervisor loop holds: an attempt credential (what a launch
holds) cannot (its scope lists no such route), and an interactive one (an agent working on its
own, an MCP client) cannot either, so the agent whose work it is cannot write what the page
shows as its change. The body is agent
text like any other: the mutation screen refuses a secret in it (the supervisor then sends the
file list without the text, saying why).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints
from sqlalchemy.engine import Connection

from agentc.core.model import CredentialClass
from agentc.core.wire import Body, Id, Revision, text
from agentc.service.auth import denied
from agentc.service.ops import Op, Result, new_id
from agentc.service.work.refusals import conflict, missing
from agentc.store import artifacts, leases
from agentc.store.artifacts import Artifact
from agentc.store.leases import Attempt
from agentc.store.sql import fetch_row, insert
from agentc.store.workflow import Submission

PATCH_TEXT_MAX = 1024 * 1024  # the JSON body limit bounds it further (json_body_limit_bytes)
FILES_MAX = 20_000
Path = Annotated[str, text(4096, min_length=1)]
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Lines = Annotated[int, Field(ge=0, le=1 << 40)]


class PatchFile(Body):
    """One changed path, as ``git diff-tree --numstat -M`` names it."""

    path: Path
    old_path: Path | None = None  # a rename's (or copy's) source
    status: Literal["added", "deleted", "modified", "renamed", "copied", "type_changed"]
    added: Lines | None = None  # None: a binary file
    removed: Lines | None = None


class PatchIn(Body):
    submission_id: Id
    base_revision: Revision
    candidate_revision: Revision
    reviewed_diff: Digest
    files: Annotated[list[PatchFile], Field(max_length=FILES_MAX)]
    patch: Annotated[str, text(PATCH_TEXT_MAX)] | None = None  # None: withheld, see note
    patch_bytes: Lines  # the whole patch's size, shown when its text is withheld
    note: Annotated[str, text(1000)] = ""  # why the text is withheld


def own_attempt(op: Op, project_id: str, attempt_id: str, kind: str) -> Attempt:
    """The attempt whose ``kind`` artifact the actor records: theirs (an agent's, never a
    person's), of the project, without one yet."""
    attempt = leases.get_project_attempt(op.conn, project_id, attempt_id)
    if attempt is None:
        raise missing(f"no attempt {attempt_id}")
    if op.actor.is_human or op.actor.principal_id != attempt.owner_id:
        raise denied("only the attempt's own agent records its artifacts")
    if op.actor.credential_class != CredentialClass.SUPERVISED:
        # An agent holding its own role credential (interactive) could write any diff: only
        # the supervisor loop, which computes it from the submission's revisions, records.
        raise denied("only the supervisor loop (a supervised credential) records artifacts")
    if artifacts.of_attempt(op.conn, attempt_id, kind) is not None:
        raise conflict("artifact_exists", f"attempt {attempt_id} already has its {kind}")
    return attempt


def record_patch(op: Op, project_id: str, attempt_id: str, body: PatchIn) -> Result:
    """Keep the patch of the attempt's code submission (once; the same again is a replay)."""
    attempt = own_attempt(op, project_id, attempt_id, "patch")
    sub = fetch_row(op.conn, Submission, body.submission_id)
    if sub is None or sub.attempt_id != attempt_id:
        raise missing(f"attempt {attempt_id} made no submission {body.submission_id}")
    if (sub.base_revision, sub.candidate_revision) != (body.base_revision, body.candidate_revision):
        raise conflict(
            "revisions_mismatch",
            "the patch is not of the submission's revisions: "
            f"base {sub.base_revision}, candidate {sub.candidate_revision}",
        )
    data = body.model_dump(exclude={"submission_id", "reviewed_diff"})
    row = keep(
        op, attempt, "patch", data, sub.id, body.reviewed_diff, files=len(body.files),
        withheld=body.patch is None,
    )  # fmt: skip
    return Result({"id": row.id, "kind": "patch", "digest": row.digest}, status=201)


def keep(
    op: Op,
    attempt: Attempt,
    kind: str,
    data: dict[str, Any],
    submission_id: str | None = None,
    digest: str | None = None,
    **said: Any,
) -> Artifact:
    """Insert the attempt's ``kind`` artifact and its ``artifact.recorded`` event (``said``)."""
    row = Artifact(
        id=new_id(),
        project_id=attempt.project_id,
        task_id=attempt.task_id,
        attempt_id=attempt.id,
        submission_id=submission_id,
        kind=kind,
        digest=digest,
        body_json=json.dumps(data, separators=(",", ":")),
        created_by=op.actor.principal_id,
        created_at=op.now,
    )
    insert(op.conn, row)
    op.event(
        "artifact.recorded",
        attempt.project_id,
        row.id,
        artifact=kind,
        attempt_id=attempt.id,
        submission_id=submission_id,
        **said,
    )
    return row


def patch_view(row: Artifact) -> dict[str, Any]:
    """A recorded patch as the API and the console read it."""
    body = json.loads(row.body_json)
    files = body.get("files", [])
    return {
        "id": row.id,
        "attempt_id": row.attempt_id,
        "submission_id": row.submission_id,
        "reviewed_diff": row.digest,
        **body,
        "stats": {
            "files": len(files),
            "added": sum(f.get("added") or 0 for f in files),
            "removed": sum(f.get("removed") or 0 for f in files),
        },
    }


def read_patch(conn: Connection, project_id: str, attempt_id: str) -> dict[str, Any]:
    """The attempt's patch (404 when it has none)."""
    row = artifacts.of_attempt(conn, attempt_id, "patch")
    if row is None or row.project_id != project_id:
        raise missing(f"attempt {attempt_id} has no patch")
    return patch_view(row)
