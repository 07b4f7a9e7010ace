"""Launches side by side: one worker process per launch, forked from the loop.

The loop's own process stays single-threaded and runs no launch itself: for each offer it
takes, it forks a worker, a copy of the warm loop (no interpreter starts), which runs that one
implementer or reviewer launch from its claim to its settled end
(:meth:`~agentc.supervisor.loop.launching.LeasedLaunch.outcome`) and exits. So each launch has
a process of its own: its agent session and environment, its relays' threads, its signal
state, and the child subreaper of its processes (what its launch or push helper orphans comes
to the worker, which reaps it before it exits). A worker dies with the loop (its parent-death
signal is SIGKILL; its sandbox, ``--die-with-parent``, dies with it, and the next loop settles
its record). SIGTERM or SIGINT to a worker stops its launch as a stopping loop does: a drain,
then the release.

A worker reports over a pipe, one JSON object a line: ``{"claimed": <launch id>}`` once it
holds its claim (the loop waits for that before it asks the coordinator for more work, so
``next`` never offers the same work twice and the loop's own client state is never used by two
processes at once), and ``{"outcome": <text>}`` once its launch is settled.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from agentc.files import json_objects
from agentc.files.procs import dies_with
from agentc.sandbox import reaper
from agentc.supervisor.loop.launching import log
from agentc.supervisor.loop.records import now_ms
from agentc.supervisor.loop.slots import Slots

if TYPE_CHECKING:
    from agentc.supervisor.loop.launching import LeasedLaunch

REPORT_MAX = 64 * 1024  # a worker's report lines, at most (its outcome is one line)


class Report:
    """The worker's end of its pipe to the loop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, **data: str) -> None:
        line = json.dumps(data).encode() + b"\n"
        with contextlib.suppress(OSError):  # the loop is gone: the worker dies with it
            os.write(self.fd, line[:REPORT_MAX])


@dataclass
class Worker:
    """One launch's worker as the loop sees it."""

    pid: int
    launch_id: str
    role: str
    task: str
    project: str
    harness: str
    fd: int  # the read end of its report pipe (-1 once closed)
    started_ms: int
    claimed: bool = False
    outcome: str | None = None
    status: int | None = None  # its exit status, once it was reaped
    buffer: bytes = b""

    @property
    def ended(self) -> bool:
        return self.status is not None

    @property
    def ran(self) -> bool:
        """Whether its launch ran (to its end, however that was): a freed slot is worth a
        poll at once, unlike one freed by a launch that failed to start."""
        return self.ended and (self.outcome or "").startswith(("Launched", "Reviewed"))

    def read(self) -> None:
        """Take what the worker reported so far (never waits)."""
        while self.fd >= 0:
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                os.close(self.fd)
                self.fd = -1
                break
            self.buffer = (self.buffer + chunk)[-REPORT_MAX:]
        *lines, self.buffer = self.buffer.split(b"\n")
        for data in json_objects(lines):
            if data.get("claimed") == self.launch_id:
                self.claimed = True
            if isinstance(data.get("outcome"), str):
                self.outcome = data["outcome"]

    def reap(self) -> bool:
        """Whether the worker has exited (then it is reaped and its last report read)."""
        if self.status is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else: its report still says how it went
            pid, status = self.pid, 0
        if pid == 0:
            return False
        self.status = os.waitstatus_to_exitcode(status)
        self.read()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.outcome is None:
            how = f"signal {-self.status}" if self.status < 0 else f"status {self.status}"
            self.outcome = f"Failed({self.task}: its launch's worker ended ({how}) unreported)"
        return True

    def entry(self) -> str:
        """How the poll that started it reads: its outcome once known, else that it runs."""
        if self.outcome is not None:
            return self.outcome
        return f"Started {{task: {self.task!r}, role: {self.role!r}, launch: {self.launch_id!r}}}"

    def live(self) -> dict[str, Any]:
        """What the heartbeat says of it while it runs."""
        return {
            "launch": self.launch_id,
            "role": self.role,
            "task": self.task,
            "project": self.project,
            "started_ms": self.started_ms,
        }


def fork(
    launch_id: str,
    role: str,
    task: str,
    project: str,
    harness: str,
    work: Callable[[Report], str],
) -> Worker:
    """Start ``work`` (one launch, from its claim to its settled end; it returns the outcome)
    in a worker process; returns the loop's view of it."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    loop_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _serve(write_fd, loop_pid, work)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    return Worker(pid, launch_id, role, task, project, harness, read_fd, now_ms())


def _serve(fd: int, loop_pid: int, work: Callable[[Report], str]) -> NoReturn:
    """The worker's life: its launch's outcome reported, what it orphaned reaped, then out."""
    code = 1
    report = Report(fd)
    try:
        if dies_with(loop_pid, signal.SIGKILL):  # else the loop is gone already: nothing to do
            reaper.set_child_subreaper()
            report.send(outcome=work(report))
            code = 0
    except BaseException as exc:
        report.send(outcome=f"Failed({type(exc).__name__}: {exc})")
    finally:
        try:  # what its launch or push helper orphaned to it
            line = reaper.reap_strays(keep=()).line()
            if line is not None:
                log(line.removeprefix("agentc-supervisor: "))
        finally:
            os._exit(code)


def wait(workers: Iterable[Worker], seconds: float) -> None:
    """Sleep up to ``seconds``, waking as soon as a worker reports (or exits: its pipe ends)."""
    fds = [w.fd for w in workers if w.fd >= 0]
    if fds:
        select.select(fds, [], [], max(0.0, seconds))
    else:
        select.select([], [], [], max(0.0, seconds))


def signal_all(workers: Iterable[Worker], signum: int) -> None:
    for worker in workers:
        if not worker.ended:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signum)


class Launches:
    """The loop's running launches: its workers, within its slots (:mod:`.slots`).

    ``beat`` writes the loop's heartbeat (after a launch starts or ends, and every
    ``beat_seconds`` while the loop waits); ``stopping`` says whether the loop was told to
    stop. In a worker the set is empty and ``report`` is its pipe to the loop.
    """

    def __init__(
        self,
        slots: Slots,
        beat: Callable[[], None],
        stopping: Callable[[], bool],
        beat_seconds: float,
    ) -> None:
        self.slots = slots
        self.workers: dict[int, Worker] = {}
        self.beat_now = beat
        self.stopping = stopping
        self.beat_seconds = beat_seconds
        self.next_beat = 0.0
        self.freed = False  # a launch that ran ended since the flag was last cleared
        self.report: Report | None = None

    def beat(self) -> None:
        self.beat_now()
        self.next_beat = time.monotonic() + self.beat_seconds

    def free(self, role: str) -> bool:
        """Whether a launch of ``role`` may start now (implementers leave the review slots)."""
        if len(self.workers) >= self.slots.total:
            return False
        if role == "implementer":
            running = sum(w.role == "implementer" for w in self.workers.values())
            return running < self.slots.implementers
        return True

    def running(self, role: str) -> list[tuple[str, str]]:
        """(launch id, harness) of each running launch of ``role``."""
        return [(w.launch_id, w.harness) for w in self.workers.values() if w.role == role]

    def live(self) -> list[dict[str, Any]]:
        """The running launches, oldest first, as the heartbeat shows them."""
        return [w.live() for w in sorted(self.workers.values(), key=lambda w: w.started_ms)]

    def start(self, launch: LeasedLaunch) -> Worker:
        """Fork ``launch``'s worker; returns once it holds its claim, ended, or the loop was
        told to stop."""

        def work(report: Report) -> str:
            self.workers.clear()  # the worker's copy: it has no workers of its own
            self.report = report
            return launch.outcome()

        worker = fork(
            launch.launch_id,
            launch.role,
            launch.task,
            launch.binding.project_id,
            launch.vendor["harness"],
            work,
        )
        self.workers[worker.pid] = worker
        if self.stopping():  # told to stop while it was forked: it must hear it too
            signal_all([worker], signal.SIGTERM)
        self.beat()
        self.wait_for(lambda: worker.claimed or worker.ended)
        return worker

    def claimed(self, launch_id: str) -> None:
        """In a worker: tell the loop its launch holds its claim."""
        if self.report is not None:
            self.report.send(claimed=launch_id)

    def wait_for(
        self,
        done: Callable[[], bool],
        until: float = float("inf"),
        *,
        through_stop: bool = False,
    ) -> None:
        """Wait until ``done()``, the monotonic time ``until`` or (unless ``through_stop``) a
        stop; meanwhile ended workers are collected and the heartbeat beaten."""
        while not done() and (through_stop or not self.stopping()):
            now = time.monotonic()
            if now >= until:
                return
            wait(self.workers.values(), min(1.0, until - now, max(0.0, self.next_beat - now)))
            self.collect()
            if time.monotonic() >= self.next_beat:
                self.beat()

    def drain(self) -> None:
        """Wait for every running launch to end (each was told to stop: drained, released)."""
        self.wait_for(lambda: not self.workers, through_stop=True)

    def collect(self) -> list[Worker]:
        """Take the ended workers out of the set (each logged with its outcome); then reap
        what they orphaned to the loop and beat. Returns them."""
        ended = []
        for worker in list(self.workers.values()):
            worker.read()
            if worker.reap():
                del self.workers[worker.pid]
                ended.append(worker)
                self.freed = self.freed or worker.ran
                log(f"launch {worker.launch_id} ({worker.role}, task {worker.task}) ended: "
                    f"{worker.outcome}")  # fmt: skip
        if ended:
            self.reap_strays()
            self.beat()
        return ended

    def reap_strays(self) -> None:
        """Kill and reap what ended work orphaned to the loop (the subreaper of its workers'
        leftovers), keeping the running workers, so no zombie piles up in a long-running
        loop."""
        line = reaper.reap_strays(keep=self.workers).line()
        if line is not None:
            log(line.removeprefix("agentc-supervisor: "))

    def signal(self, signum: int) -> None:
        """Tell every running launch's worker (a stop: each drains its launch)."""
        signal_all(self.workers.values(), signum)
