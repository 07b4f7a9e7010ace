"""Batching (``landing_batch`` above 1): several queued changes checked together, landed in order.

The queue is taken in chunks of ``landing_batch`` candidates, in queue order. For a chunk, each
candidate's landing is built as today (:func:`agentc.integrator.landing.build`: the reviewed
change put on the commit before it, verified to be exactly the reviewed change), but on the
previous member's landing instead of the target: the chain's last commit is the combined
revision, and the required checks run once, on it. A candidate that cannot join (anything but
a clean build on the chain: refused, a scan finding, a landing found, a journal entry in
flight) ends the batch there, so the queue's order is kept; it and the rest of the chunk take
today's one-at-a-time path.

Green: every member is sealed as today (the same trees, the checks' results in its trailers,
signed), each on the sealed one before it, so the target gets one commit per change in queue
order. Every member's journal entry says ``pushing`` (its own sealed commit over the one before
it) before one compare-and-swap push of the last commit over the old target; then the remote
decides for each as today (:meth:`agentc.integrator.engine.Integrator.resolve_push`): either
all are on the target and each is recorded once, or none is and each is ``checked`` on a chain
whose first link is the old target.

Red: the batch is split one by one: each member takes today's path, its own check on the
target, so a culprit is sent back with its own check's result and tail, the others land, and a
red target is found (and told) by the same rule as today, nobody's fault.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agentc.integrator.checks import CheckResult
from agentc.integrator.config import IntegratorConfig
from agentc.integrator.coordinator import Candidate, Coordinator
from agentc.integrator.journal import Entry, Journal, Step
from agentc.integrator.landing import Landing, seal
from agentc.integrator.repo import Repo
from agentc.integrator.scan import Finding

T = TypeVar("T")


class Integrator(Protocol):
    """What a batch uses of :class:`agentc.integrator.engine.Integrator` (which calls this
    module: a protocol, not an import, keeps the modules free of a cycle)."""

    config: IntegratorConfig
    coordinator: Coordinator
    repo: Repo
    journal: Journal

    def first_entry(self, cand: Candidate, tip: str) -> Entry: ...
    def unfit(self, cand: Candidate, tip: str) -> tuple[str, str] | None: ...
    def scan(self, cand: Candidate) -> list[Finding]: ...
    def build_on(self, cand: Candidate, onto: str) -> Landing: ...
    def check(self, revision: str, name: Path) -> list[CheckResult]: ...
    def resolve_push(self, entry: Entry) -> bool: ...
    def land_one(self, candidate: Candidate) -> int: ...
    def guarded(self, item: Entry | Candidate, step: Callable[[], T]) -> T | None: ...
    def write(self, event: str, **fields: Any) -> None: ...
    def report(self, event: str, entry: Entry | Candidate, **fields: Any) -> None: ...


IN_FLIGHT = (Step.PUSHING, Step.RECORDED)


@dataclass(frozen=True)
class Member:
    """A candidate in a batch: its journal entry (not yet saved) and its unsealed landing."""

    cand: Candidate
    entry: Entry
    landing: Landing


def chunks(queue: list[Candidate], size: int) -> list[list[Candidate]]:
    return [queue[i : i + size] for i in range(0, len(queue), size)]


def join(integ: Integrator, cand: Candidate, tip: str, top: str) -> Member | None:
    """``cand``'s landing built on ``top`` (the batch so far on ``tip``), or None when it
    cannot join the batch and must take the one-at-a-time path."""
    entry = integ.journal.load(cand.activity_id)
    mine = entry is not None and entry.submission_id == cand.submission_id
    if mine and entry is not None and (entry.step in IN_FLIGHT or entry.target_before == tip):
        return None  # in flight, or decided on this very target: today's path knows what to do
    if integ.unfit(cand, tip) is not None:
        return None
    trailers = {"Agentc-Activity": cand.activity_id, "Agentc-Submission": cand.submission_id}
    if integ.repo.find_landing(cand.base_revision, tip, trailers) is not None:
        return None
    if not cand.held and integ.scan(cand):
        return None
    try:
        landing = integ.build_on(cand, top)
    except ValueError:
        return None
    if landing.revision is None or landing.commits is None:  # refused, or empty
        return None
    base = integ.first_entry(cand, tip).at(Step.CHECKED, reviewed_diff=landing.reviewed_diff)
    return Member(cand, base, landing)


def land_batch(integ: Integrator, chunk: list[Candidate]) -> tuple[int, list[Candidate]]:
    """Land ``chunk`` as one batch where it can: the landings made, and the candidates left to
    the one-at-a-time path (in queue order)."""
    tip = integ.repo.fetch_target()
    if tip is None:
        return 0, chunk
    members: list[Member] = []
    top = tip
    for cand in chunk:
        member = join(integ, cand, tip, top)
        if member is None:
            break
        members.append(member)
        assert member.landing.revision is not None
        top = member.landing.revision
    if len(members) < 2:
        return 0, chunk
    rest = chunk[len(members) :]
    ids = [m.cand.activity_id for m in members]
    checks = integ.check(top, Path("batches") / top)
    records = [c.record() for c in checks]
    if not all(c.passed for c in checks):
        last = checks[-1]
        reason = f"check {last.name} {last.outcome} (exit {last.exit_code}): split one by one"
        fields = {"target": tip, "revision": top, "activities": ids, "reason": reason}
        integ.write("batch_red", task_id=None, tail=last.tail, checks=records, **fields)
        return 0, chunk
    integ.write("batch_green", task_id=None, target=tip, revision=top, activities=ids)
    try:
        entries = sealed_chain(integ, members, tip, records)
    except ValueError as exc:  # by construction never; never trusted either
        integ.write("error", task_id=None, reason=f"sealing the batch: {exc}")
        return 0, chunk
    landed = push_batch(integ, entries, tip)
    # None landed (the target moved, the remote refused): the members go on in queue order on
    # today's path, before anything behind them: rebuilt on the moved target, or the first
    # pushed again alone over the target it was checked on.
    return landed, rest if landed else chunk


def sealed_chain(
    integ: Integrator, members: list[Member], tip: str, records: list[dict[str, object]]
) -> list[Entry]:
    """Each member sealed on the sealed one before it (the first on ``tip``): the same trees as
    checked, each one commit of its own, its journal entry naming its own link."""
    entries, parent = [], tip
    for m in members:
        plan = m.landing.commits
        assert plan is not None
        if plan.shape == "reviewed" and plan.base != parent:  # only the first can be on base
            raise ValueError("a batch member's reviewed commit is not on the one before it")
        landing = replace(m.landing, commits=replace(plan, tip=parent))
        sealed = seal(integ.repo, landing, records)
        entries.append(
            m.entry.at(Step.CHECKED, result_revision=sealed, checks=records, target_before=parent)
        )
        parent = sealed
    return entries


def push_batch(integ: Integrator, entries: list[Entry], tip: str) -> int:
    """Journal every member at ``pushing``, push the last over ``tip`` (one compare-and-swap),
    then let the remote decide for each: all landed (each recorded once) or none (each
    ``checked`` on its own link)."""
    entries = [integ.journal.save(e.at(Step.PUSHING)) for e in entries]
    last = entries[-1].result_revision
    assert last is not None
    refused = integ.repo.push_if_unmoved(tip, last)
    landed = sum(1 for e in entries if integ.resolve_push(e))
    if landed == 0:
        event = "error" if integ.repo.remote_tip() == tip else "target_moved"
        for e in entries:
            integ.report(event, e, target=tip, reason=f"the batch's push: {refused}")
    return landed


def land_queue(integ: Integrator, queue: list[Candidate]) -> int:
    """The queue in batches of ``landing_batch``; the landings made."""
    landed = 0
    for chunk in chunks(queue, integ.config.landing_batch):
        rest = chunk
        if len(chunk) > 1:
            got = integ.guarded(chunk[0], functools.partial(land_batch, integ, chunk))
            if got is not None:
                count, rest = got
                landed += count
        for cand in rest:
            landed += integ.land_one(cand)
    return landed
