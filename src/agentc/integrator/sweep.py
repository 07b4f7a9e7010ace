"""Removing the remote's candidate and WIP refs once their task has ended.

The push helper (docs/push.md) publishes under ``refs/agent-coordinator/candidates/``:
``<task>/<launch>`` (a launch's candidate) and ``wip/<task>/<launch>/<revision>`` (create-only
WIP checkpoints); it never removes either. The integrator, the one program with push access to
the remote and a coordinator binding, sweeps them:

- WIP refs go once their task is done or canceled;
- a candidate ref the integrator used (named by a submission whose integration landed or was
  sent back) is evidence: it stays ``candidate_retention_days`` after the task ended (0: for
  ever), then goes;
- a candidate ref of an ended task that a listed submission names and the integrator never used
  goes with the WIP refs; any other candidate ref is kept for the retention period too.

Ref names and task records are hostile input: a name of any other shape, an id that is not a
safe ref component, a task the integrator cannot read or that has not ended, a record without
a readable end time: each is left alone. Every delete is compare-and-swap
(``--force-with-lease=<ref>:<revision>``), and nothing outside the prefix is ever named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from agentc.client.errors import BadAnswer
from agentc.client.reads import TaskDetail
from agentc.core.errors import CoordinatorError
from agentc.core.rules import is_safe_id, ms_of
from agentc.integrator.coordinator import Coordinator
from agentc.integrator.repo import Repo
from agentc.push.refs import CANDIDATES

PREFIX = CANDIDATES + "/"
DAY_MS = 86_400_000
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
ENDED = ("done", "canceled")


@dataclass(frozen=True)
class Published:
    """One ref the push helper publishes: a candidate, or a WIP checkpoint."""

    ref: str
    revision: str
    task_id: str
    wip: bool


@dataclass(frozen=True)
class Ended:
    """What the sweep needs of an ended task."""

    ended_ms: int
    used: frozenset[str]  # candidate refs whose integration landed or was sent back
    unused: frozenset[str]  # candidate refs of listed submissions never integrated


def parse(refs: Mapping[str, str]) -> list[Published]:
    """The refs of the two published shapes; anything else is left out."""
    found = []
    for ref, revision in sorted(refs.items()):
        if not ref.startswith(PREFIX) or not _SHA.fullmatch(revision):
            continue
        parts = ref[len(PREFIX) :].split("/")
        if len(parts) == 2 and all(is_safe_id(p) for p in parts):
            found.append(Published(ref, revision, parts[0], wip=False))
        elif (
            len(parts) == 4
            and parts[0] == "wip"
            and all(is_safe_id(p) for p in parts[1:3])
            and _SHA.fullmatch(parts[3])
        ):
            found.append(Published(ref, revision, parts[1], wip=True))
    return found


def ended(task: TaskDetail) -> Ended | None:
    """The task's end and its candidate refs' use, or None (not ended)."""
    ended_ms = ms_of(task["updated_at"])
    if task["lifecycle"] not in ENDED or ended_ms is None:
        return None
    flow = task["workflow"]
    integrated = {
        a["submission_id"]
        for a in flow["activities"]
        if a["kind"] == "integration" and (a["state"] == "completed" or a.get("sent_back"))
    }
    named = {s["candidate_ref"]: s["id"] for s in flow["submissions"] if s["candidate_ref"]}
    used = frozenset(ref for ref, sub in named.items() if sub in integrated)
    return Ended(ended_ms, used, frozenset(named) - used)


def removals(
    refs: Iterable[Published], task: Ended, now_ms: int, retention_days: float
) -> list[tuple[Published, str]]:
    """Which of an ended task's refs go now, each with the reason."""
    expired = retention_days > 0 and now_ms >= task.ended_ms + retention_days * DAY_MS
    chosen = []
    for item in refs:
        if item.wip:
            chosen.append((item, "a WIP ref of an ended task"))
        elif item.ref in task.unused:
            chosen.append((item, "a candidate ref of an ended task the integrator never used"))
        elif expired:
            chosen.append((item, f"a candidate ref kept {retention_days:g} days after its task"))
    return chosen


Write = Callable[..., None]


class Sweeper:
    """One sweep of the remote's published refs (``sweep``), reporting through ``write``."""

    def __init__(
        self, repo: Repo, coordinator: Coordinator, retention_days: float, write: Write
    ) -> None:
        self.repo = repo
        self.coordinator = coordinator
        self.retention_days = retention_days
        self.write = write

    def sweep(self, now_ms: int) -> int:
        """Remove what is due; the number of refs removed."""
        by_task: dict[str, list[Published]] = {}
        for item in parse(self.repo.ls_remote(PREFIX + "*")):
            by_task.setdefault(item.task_id, []).append(item)
        removed = 0
        for task_id, refs in by_task.items():
            try:
                task = self.coordinator.task(task_id)
            except CoordinatorError as exc:
                if exc.status not in (403, 404):  # not this project's task: left alone
                    self.write("error", task_id=task_id, reason=f"sweeping refs: {exc}")
                continue
            except BadAnswer as exc:  # its refs are left for a later sweep
                self.write("error", task_id=task_id, reason=f"sweeping refs: {exc}")
                continue
            state = ended(task)
            if state is not None:
                removed += self._remove(task_id, removals(refs, state, now_ms, self.retention_days))
        return removed

    def _remove(self, task_id: str, chosen: list[tuple[Published, str]]) -> int:
        if not chosen:
            return 0
        deleted, failed = self.repo.delete_remote_refs({p.ref: p.revision for p, _ in chosen})
        for item, why in chosen:
            if item.ref in deleted:
                self.write(
                    "ref_removed", task_id=task_id, ref=item.ref, revision=item.revision, reason=why
                )
        if failed:
            self.write("error", task_id=task_id, reason=f"removing refs: {failed}")
        return len(deleted)
