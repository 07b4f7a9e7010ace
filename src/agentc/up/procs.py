"""The process tree ``agentc up`` runs: one child per program, each with its own log.

Each child runs in a process group of its own (a Ctrl-C in the terminal reaches ``up`` alone,
which then stops the children in order: the supervisor loop first, so it drains its launch and
releases the attempt while the coordinator still answers, then the integrator, then the
coordinator) and gets SIGTERM if ``up`` itself dies (a parent-death signal), so nothing
outlives it.

A child that exits while ``up`` runs is started again (:meth:`Tree.tend`): after a backoff
that doubles with each exit in a row that came soon after its start, and given up on
(:class:`GivenUp`: ``up`` then stops the others) when it exits ``GIVE_UP_AFTER`` times in a
row, each within ``QUICK_SECONDS`` of its start. Whatever the dead child left in its process
group is killed before it starts again; the programs' own recovery does the rest (the
supervisor loop settles the launch it had, docs/supervisor.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.files import UnsafeFile, read_tail
from agentc.files.procs import ask_parent_death_signal, start_detached

QUICK_SECONDS = 30.0  # a child that exits sooner than this after its start died "at once"
GIVE_UP_AFTER = 4  # so many such exits in a row, and up gives up on it
FIRST_BACKOFF = 1.0  # seconds before the first restart; doubled for each quick exit in a row
MAX_BACKOFF = 30.0


class GivenUp(AgentcError):
    """A child kept exiting soon after each start: restarting it again would not help."""


@dataclass
class Child:
    name: str
    argv: list[str]
    log: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    restarts: int = 0
    quick: int = 0  # exits in a row, each within QUICK_SECONDS of its start
    due: float | None = None  # dead: when it starts again

    def tail(self, size: int = 1500) -> str:
        try:
            data = read_tail(self.log, size)
        except (OSError, UnsafeFile):
            return ""
        return data.decode("utf-8", "replace").strip()


@dataclass
class Tree:
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: list[str], log: Path, env: dict[str, str]) -> Child:
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        proc = _spawn(argv, env, log, f"started {name}: {' '.join(argv)}")
        child = Child(name, argv, log, env, proc)
        self.children.append(child)
        return child

    def tend(self, now: float) -> list[str]:
        """Restart the children that died (``now``: ``time.monotonic()``); what happened, one
        line each. Raises :class:`GivenUp` for a child that keeps dying at once."""
        said = []
        for child in self.children:
            code = child.proc.poll()
            if code is None:
                continue
            if child.due is None:  # just found dead
                ran = now - child.started
                child.quick = child.quick + 1 if ran < QUICK_SECONDS else 0
                if child.quick >= GIVE_UP_AFTER:
                    raise GivenUp(
                        f"the {child.name} exited ({code}) {child.quick} times in a row, each "
                        f"within {QUICK_SECONDS:g} s of its start; not starting it again. "
                        f"The end of {child.log}:\n{child.tail()}"
                    )
                delay = min(FIRST_BACKOFF * 2**child.quick, MAX_BACKOFF)
                child.due = now + delay
                said.append(
                    f"the {child.name} exited ({code}) after {ran:.0f} s; starting it again in "
                    f"{delay:g} s"
                )
            elif now >= child.due:
                _signal_group(child.proc.pid, signal.SIGKILL)  # anything it left behind
                child.restarts += 1
                why = f"restarted {child.name} (restart {child.restarts}, it exited {code})"
                child.proc = _spawn(child.argv, child.env, child.log, why)
                child.started, child.due = now, None
                said.append(f"{why}: pid {child.proc.pid}")
        return said

    def exited(self) -> list[Child]:
        return [c for c in self.children if c.proc.poll() is not None]

    def stop(self, name: str, timeout: float) -> int | None:
        """SIGTERM to the child's group, SIGKILL after ``timeout``; its exit status."""
        for child in self.children:
            if child.name != name:
                continue
            proc = child.proc
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                if proc.poll() is None:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait()
            _signal_group(proc.pid, signal.SIGKILL)  # anything left in its group
            return proc.returncode
        return None

    def stop_all(self, order: list[tuple[str, float]]) -> None:
        for name, timeout in order:
            self.stop(name, timeout)


def _spawn(argv: list[str], env: dict[str, str], log: Path, why: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        out.write(f"--- agentc up {why}\n".encode())
        out.flush()
        return start_detached(argv, env, out, ask_parent_death_signal)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
