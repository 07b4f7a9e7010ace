"""Several service processes on one listening socket (`serve --workers N`, PostgreSQL only).

The master process migrates the database, binds the loopback socket once and forks N workers
that each accept from it, with their own engine, connection pool and executor: no state the
rules depend on lives in a process (row locks, the unique indexes that keep one active attempt
per task and one receipt per idempotency key, the project row lock of task admission are all
PostgreSQL's). The master serves nothing itself: it starts a new worker when one exits, and on
SIGTERM or SIGINT stops them all (SIGTERM, then SIGKILL after `STOP_GRACE_S`).

A worker that exits within `QUICK_EXIT_S` of its start is restarted after a back-off that
doubles up to `BACKOFF_MAX_S`, so a worker that cannot start does not spin.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from types import FrameType

from agentc.files.procs import dies_with

STOP_GRACE_S = 30.0
QUICK_EXIT_S = 5.0
BACKOFF_MAX_S = 30.0


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The listening socket every worker accepts from (inherited across fork)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _die_with_parent(master: int) -> None:
    """A worker ends when the master does, even when the master is killed outright."""
    try:
        alive = dies_with(master, signal.SIGTERM)
    except OSError:
        return
    if not alive:  # the master died before the request took hold
        os._exit(0)


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


class Master:
    def __init__(
        self,
        count: int,
        worker: Callable[[socket.socket], None],
        sock: socket.socket,
        say: Callable[[str], None],
    ) -> None:
        self.count = count
        self.worker = worker
        self.sock = sock
        self.say = say
        self.children: dict[int, float] = {}  # pid -> start time (monotonic)
        self.stopping = False
        self.backoff = 0.0
        self.next_spawn = 0.0

    def _on_signal(self, _sig: int, _frame: FrameType | None) -> None:
        self.stopping = True

    def _spawn(self) -> None:
        master = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _die_with_parent(master)
                self.worker(self.sock)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # a worker reports its failure in the log and ends
                print(f"agentc worker {os.getpid()} failed:", file=sys.stderr)
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        self.children[pid] = time.monotonic()
        self.say(f"worker started (pid {pid})")

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        for _ in range(self.count):
            self._spawn()
        while not self.stopping:
            self._reap(restart=True)
            if len(self.children) < self.count and time.monotonic() >= self.next_spawn:
                self._spawn()
            time.sleep(0.1)
        self._stop()
        return 0

    def _reap(self, *, restart: bool) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            started = self.children.pop(pid, None)
            if started is None or not restart or self.stopping:
                continue
            quick = time.monotonic() - started < QUICK_EXIT_S
            self.backoff = min(BACKOFF_MAX_S, max(1.0, self.backoff * 2)) if quick else 0.0
            self.next_spawn = time.monotonic() + self.backoff
            self.say(
                f"worker pid {pid} {_exit_text(status)}; starting another"
                + (f" in {self.backoff:.0f} s" if self.backoff else "")
            )

    def _stop(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while self.children and time.monotonic() < deadline:
            self._reap(restart=False)
            time.sleep(0.05)
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.children.clear()
        self.sock.close()


def serve_forked(
    count: int,
    sock: socket.socket,
    worker: Callable[[socket.socket], None],
    say: Callable[[str], None],
) -> int:
    """Run `count` workers on `sock` until SIGTERM or SIGINT; returns the exit status."""
    return Master(count, worker, sock, say).run()
