"""The process tree ``agentc up`` runs: one child per program, each with its own log.

Each child runs in a process group of its own (a Ctrl-C in the terminal reaches ``up`` alone,
which then stops the children in order: the supervisor loop first, so it drains its launch and
releases the attempt while the coordinator still answers, then the integrator, then the
coordinator) and gets SIGTERM if ``up`` itself dies (a parent-death signal), so nothing
outlives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentc.files.procs import ask_parent_death_signal, start_detached


@dataclass
class Child:
    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes]

    def tail(self, size: int = 1500) -> str:
        try:
            data = self.log.read_bytes()[-size:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()


@dataclass
class Tree:
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: list[str], log: Path, env: dict[str, str]) -> Child:
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with log.open("ab") as out:
            out.write(f"--- agentc up started {name}: {' '.join(argv)}\n".encode())
            out.flush()
            proc = start_detached(argv, env, out, ask_parent_death_signal)
        child = Child(name, argv, log, proc)
        self.children.append(child)
        return child

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


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
