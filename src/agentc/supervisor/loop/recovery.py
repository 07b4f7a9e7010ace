"""Settling what launches left: every record in ``<state>/loop/launches/`` no running worker of
this loop holds (a launch whose worker died, a crashed or restarted loop's launches).

A launch that may still run (its pid runs with the recorded ``/proc`` start time on this boot)
is never started again, and the poll claims nothing while it lives. Any other record first has
whatever its cgroups still hold killed, then its attempt (or review) released with a handoff,
unless the agent submitted or released it; its clone, run and private state are removed and the
record moves to ``finished/``. Each record is settled once: it says ``released`` before anything
is removed, and only the loop settles records (a worker settles its own launch, whose record
this loop skips while the worker runs).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Protocol

from agentc.core.errors import AgentcError, ConfigError
from agentc.sandbox import limits
from agentc.supervisor.loop import coordinator, review, steps
from agentc.supervisor.loop.implementer import handoff, layout_of, record_attempt, remove_launch
from agentc.supervisor.loop.launching import log
from agentc.supervisor.loop.records import (
    MAX_RELEASE_TRIES,
    LaunchRecord,
    boot_id,
    may_be_alive,
    now_ms,
)
from agentc.supervisor.loop.review import Reviewing


class Settling(Reviewing, Protocol):
    """What settling needs of the loop (:class:`agentc.supervisor.loop.run.Loop`)."""

    given_up: set[str]

    def binding_of(self, project: str) -> coordinator.Binding: ...

    def served(self, project: str) -> tuple[coordinator.Binding, Path]: ...


def settle(loop: Settling, running: Collection[str]) -> str | None:
    """Settle every record a launch left, but those of the ``running`` launch ids (this loop's
    workers); a refusal while one may still run."""
    boot, now = boot_id(), now_ms()
    alive = []
    for record in loop.records.all():
        if record.launch_id in loop.given_up or record.launch_id in running:
            continue
        if may_be_alive(record, boot=boot, now=now):
            alive.append(record.launch_id)
            continue
        settle_dead(loop, record)
    if alive:
        return f"Refused({'an earlier launch may still run (' + ', '.join(alive) + ')'!r})"
    return None


def settle_dead(loop: Settling, record: LaunchRecord) -> None:
    private: Path = loop.records.sessions / record.launch_id
    reviewing = record.role == "reviewer"
    # First, anything of the launch that still runs (one started in the instant before its
    # supervisor died has no pid on record) ends with its cgroups.
    limits.remove_left(
        loop.config.limits, f"agentc-{record.launch_id}", f"agentc-setup-{record.launch_id}"
    )
    try:
        if reviewing and loop.reviewer is None:
            raise ConfigError("a review was left held: set [run] reviewer = true to settle it")
        if not record.released and private.exists():
            if reviewing:
                record.outcome = review.release_dead(loop, record, private)
            else:
                record.outcome = _release_dead(loop, record, private)
    except AgentcError as exc:
        loop.release_failed(record, exc)
        if record.release_failures >= MAX_RELEASE_TRIES:
            loop.given_up.add(record.launch_id)
            log(f"error: launch {record.launch_id}: {record.outcome}; left until a restart")
        return
    remove: Callable[[], None] = (
        (lambda: review.remove_review(loop, record))
        if reviewing
        else (lambda: remove_launch(loop, record.launch_id))
    )
    loop.settle_launch(record, remove)
    log(f"settled launch {record.launch_id} (task {record.task}): {record.outcome}")


def _release_dead(loop: Settling, record: LaunchRecord, private: Path) -> str:
    binding, mirror = loop.served(record.project)
    with coordinator.session_client(binding, private, record.launch_id) as client:
        coordinator.resolve_pending(client)  # a lost claim answer is finished, not redone
        attempt, generation = record.attempt, record.generation
        held = client.state().attempt
        if attempt is None and held is not None:
            attempt, generation = str(held["id"]), int(held["generation"])
        if attempt is None:
            return "nothing to release (no attempt was claimed)"
        coordinator.revoke_launch_credentials(client, attempt, generation)
        state = coordinator.task_attempt_state(client, attempt)
        # What the launch did is recorded as its own loop would have (its patch when it
        # submitted, its run), from what it left on disk.
        ended = steps.last_written(layout_of(loop, record.launch_id).run)
        record_attempt(
            loop, client, record, mirror, attempt, state, exited=steps.UNWATCHED, ended_ms=ended
        )
        if state != "active":
            return f"left as it is ({state or 'unknown'})"
        return coordinator.release(client, attempt, generation, handoff(steps.UNWATCHED + "."))
