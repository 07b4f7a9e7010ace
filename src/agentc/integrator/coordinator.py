"""What the integrator asks the coordinator, through its integrator credential only.

Work is the project's landing queue (``GET …/integration/queue``: the approved code
submissions, in approval order, with their candidates); a landing is
recorded with ``POST .../workflow-activities/{id}/landing``, under an idempotency key derived
from the activity and the landed revision, so a resent landing replays instead of landing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agentc.client.project import ProjectApi
from agentc.client.reads import TaskDetail, shaped
from agentc.core import secrets
from agentc.core.errors import ConfigError, CoordinatorError
from agentc.files import UnsafeFile, read_private
from agentc.integrator.journal import Entry

MAX_TOKEN_BYTES = 4096
Recorded = Callable[[dict[str, Any]], bool]
"""Whether an activity's view shows an outcome recorded already."""
PAGE = 200


@dataclass(frozen=True)
class Candidate:
    """An approved code submission waiting for integration."""

    task_id: str
    activity_id: str
    submission_id: str
    candidate_ref: str
    candidate_revision: str
    base_revision: str  # the revision it was reviewed against ("" when the submission has none)
    title: str  # the task's title: the first line of the landing's message
    held: bool = False  # held for a person by the scan, and approved since: not scanned again


def read_token(path: Path) -> str:
    """The integrator credential: the file's one line (owner-only, no symlink)."""
    try:
        raw = read_private(path, max_bytes=MAX_TOKEN_BYTES)
    except UnsafeFile as exc:
        raise ConfigError(f"credential_file: {exc.path}: {exc.reason}") from None
    token = raw.decode("utf-8", errors="replace").strip()
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"credential_file: {path}: expected one token on one line")
    return token


class Coordinator(ProjectApi):
    """The coordinator as the integrator credential reads and writes it."""

    def queue(self) -> list[Candidate]:
        """The project's landing queue (``GET …/integration/queue``): every approved code
        submission waiting to land, in approval order."""
        found: list[Candidate] = []
        for item in self.get(f"/integration/queue?limit={PAGE}")["items"]:
            if not item.get("candidate_ref"):
                continue  # (not a code submission: nothing to land)
            found.append(
                Candidate(
                    str(item["task_id"]),
                    str(item["activity_id"]),
                    str(item["submission_id"]),
                    str(item["candidate_ref"]),
                    str(item.get("candidate_revision") or ""),
                    str(item.get("base_revision") or ""),
                    str(item.get("title") or ""),
                    bool(item.get("held")),
                )
            )
        return found

    def workflow(self, task_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self.get(f"/tasks/{quote(task_id, safe='')}/workflow")
        return data

    def task(self, task_id: str) -> TaskDetail:
        """The task with its workflow (``GET …/tasks/{id}``)."""
        return shaped(TaskDetail, self.get(f"/tasks/{quote(task_id, safe='')}"), "task")

    def provenance(self, activity_id: str) -> dict[str, Any]:
        """What the coordinator knows of how the change was made and approved (the attempt,
        its launch and prompt, the cost ledger's harnesses and models, each review)."""
        path = f"/workflow-activities/{quote(activity_id, safe='')}/provenance"
        data: dict[str, Any] = self.get(path)
        return data

    def known_secrets(self, activity_id: str, verifiers: list[str]) -> dict[str, str]:
        """Which of ``verifiers`` are the coordinator's own live secrets (verifier -> kind)."""
        path = f"/workflow-activities/{quote(activity_id, safe='')}/known-secrets"
        data = self.get(f"{path}?verifiers={','.join(verifiers)}")
        return {str(k["verifier"]): str(k["kind"]) for k in data.get("known") or []}

    def activity(self, task_id: str, activity_id: str) -> dict[str, Any] | None:
        for act in self.workflow(task_id)["activities"]:
            if act["id"] == activity_id:
                found: dict[str, Any] = act
                return found
        return None

    def record_landing(self, entry: Entry, rev: str) -> None:
        """Record the landing of ``entry`` at ``rev`` once, with the target it was built on and
        its checks: a replay, or a landing already recorded with ``rev``, is success; anything
        else is raised."""
        body = {
            "submission_id": entry.submission_id,
            "landed_revision": rev,
            "target_revision": entry.target_before,
            "checks": [check_body(c, detail=True) for c in entry.checks],
            "reviewed_diff": entry.reviewed_diff,
        }
        key = f"landing:{entry.activity_id}:{rev}"

        def landed(act: dict[str, Any]) -> bool:
            return bool(act["state"] == "completed" and act["landed_revision"] == rev)

        try:
            self._record_once(entry, "landing", body, key, landed)
        except CoordinatorError as exc:
            if exc.code != secrets.REFUSED:
                raise
            # a check's command or output quoted a secret: they stay in the checks' logs here
            plain = {**body, "checks": [check_body(c) for c in entry.checks]}
            self._record_once(entry, "landing", plain, key + ":no-tails", landed)

    def target_red(self, target: str, checks: list[dict[str, Any]]) -> None:
        """Report the target failing its own checks (once per target revision: the key)."""
        body = {"target_revision": target, "checks": [check_body(c) for c in checks]}
        self.transport.send(
            "POST", self.base + "/integration/target-red", body, key=f"target-red:{target}"
        )

    def send_back(self, entry: Entry, code: str, reason: str, tail: str) -> None:
        """Send ``entry``'s task back to its implementer with the reason (once: a replay, or an
        activity already sent back, is success)."""
        body = {
            "submission_id": entry.submission_id,
            "reason_code": code,
            "reason": reason[:4096] or "the candidate cannot land",
            "log_tail": tail[-16384:],
            "target_revision": entry.target_before,
            # each check's command and output's end: what the next round's implementer reads
            "checks": [check_body(c, detail=True) for c in entry.checks],
        }
        self._screened(entry, "send-back", body, lambda act: bool(act.get("sent_back")))

    def hold(self, entry: Entry, reason: str, tail: str) -> None:
        """Hold ``entry``'s submission for a person's review (once: a replay, or an activity
        already held, is success)."""
        body = {
            "submission_id": entry.submission_id,
            "reason": reason[:4096],
            "log_tail": tail[-16384:],
            "target_revision": entry.target_before,
        }
        self._screened(entry, "hold", body, lambda act: bool(act.get("held")))

    def _screened(self, entry: Entry, verb: str, body: dict[str, Any], recorded: Recorded) -> None:
        """:meth:`_record_once` under the key ``<verb>:<activity>:<submission>``; when the
        coordinator refuses the text for a secret (a check's output, a path the candidate
        named, quoted it), again with the log's tail replaced by a note (it stays in the logs)
        and, if the reason quoted it, the reason too."""
        key = f"{verb}:{entry.activity_id}:{entry.submission_id}"
        try:
            self._record_once(entry, verb, body, key, recorded)
        except CoordinatorError as exc:
            if exc.code != secrets.REFUSED:
                raise
            kept = "it stays in the integrator's reports and logs on its host"
            note = "agentc-integrator: " + secrets.left_out(
                exc.details, verb, "the candidate's text", kept
            )
            retry = {**body, "log_tail": note}
            if "checks" in body:  # without the commands and outputs, which may quote it too
                retry["checks"] = [
                    {k: v for k, v in c.items() if k not in ("command", "tail")}
                    for c in body["checks"]
                ]
            if exc.details.get("field") == "reason":
                retry["reason"] = f"{body.get('reason_code', verb)}: the reason quoted a secret "
                retry["reason"] += "and is left out"
            self._record_once(entry, verb, retry, key + ":note", recorded)

    def _record_once(
        self,
        entry: Entry,
        verb: str,
        body: dict[str, Any],
        key: str,
        recorded: Recorded,
    ) -> None:
        """POST ``body`` to ``entry``'s activity's ``verb`` under ``key``. A refusal because the
        activity is no longer eligible is success when the activity shows the outcome
        ``recorded`` already (an earlier attempt of ours got through)."""
        path = f"/workflow-activities/{quote(entry.activity_id, safe='')}/{verb}"
        try:
            self.transport.send("POST", self.base + path, body, key=key)
        except CoordinatorError as exc:
            if exc.code not in ("activity_not_eligible", "reviews_pending"):  # (held: pending)
                raise
            act = self.activity(entry.task_id, entry.activity_id)
            if not act or not recorded(act):
                raise


def check_body(record: Mapping[str, Any], *, detail: bool = False) -> dict[str, Any]:
    """A check's result as the coordinator records it (name, outcome, exit code, duration; with
    ``detail`` its command and the end of its output, which may quote the candidate's text)."""
    took = record.get("duration_ms")
    body = {
        "name": str(record.get("name", "check"))[:200] or "check",
        "outcome": record.get("outcome"),
        "exit_code": record.get("exit_code"),
        "duration_ms": took if isinstance(took, int) and took >= 0 else None,
        "flaky": bool(record.get("flaky")),
    }
    if detail:
        argv = record.get("argv")
        words = argv if isinstance(argv, list) else []
        body["command"] = " ".join(str(a) for a in words)[:2000].replace("\x00", "")
        body["tail"] = str(record.get("tail") or "")[-4000:].replace("\x00", "")
    return body
