"""Run the required checks on exactly one revision, in a confined sandbox.

Each run gets a fresh checkout of the revision (writable), a private home and temporary
directory (writable), and nothing else it can write. The sandbox is the supervisor's own
(:func:`agentc.sandbox.bwrap.build_argv`, role ``implementer``: no network but its own
loopback, no relays, nested user namespaces off, a read-only ``/proc``), with the implementer's
syscall filter (``--seccomp FD``) and per-run resource limits (:mod:`agentc.sandbox.limits`).
The environment is built from scratch (``PATH``, ``HOME``, ``TMPDIR``, ``LANG``): no token,
no credential. The integrator's work directory, the credential file's directory, ``/tmp``,
``/var/tmp``, ``/run``, every home and the agentc state trees are masked with empty tmpfs.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from agentc.core.errors import AgentcError
from agentc.files.options import ETC
from agentc.integrator.config import CheckConfig, IntegratorConfig
from agentc.sandbox import confined, seccomp
from agentc.sandbox.bwrap import LaunchDescription
from agentc.sandbox.limits import LaunchLimits

STANDARD_MASKS = (
    Path("/tmp"),  # noqa: S108 (masked, never used)
    Path("/var/tmp"),  # noqa: S108
    Path("/run"),
    Path("/root"),
    Path("/home"),
    Path("/var/lib/agentc"),
    ETC,
)


class CheckSetupError(AgentcError):
    """The sandbox for the checks could not be built (no bwrap, no libseccomp, no cgroup)."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    argv: list[str]
    outcome: str  # passed | failed | timed_out
    exit_code: int | None
    tail: str
    log: str
    limit: str | None = None
    duration_ms: int | None = None
    # Flaky: it failed, then passed when run once more on the same revision (this is the
    # second run; ``first`` says how the first ended, ``failed (exit 1)``).
    flaky: bool = False
    first: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def how(self) -> str:
        """How it ended, in words: ``failed (exit 1)``, ``timed_out``."""
        return (
            f"{self.outcome} (exit {self.exit_code})"
            if self.exit_code is not None
            else (self.outcome)
        )

    def record(self) -> dict[str, Any]:
        return asdict(self)


def masks_for(config: IntegratorConfig) -> tuple[PurePosixPath, ...]:
    """Every tree the checks must not see (only those that exist: bwrap needs a mount point)."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    wanted = [
        *STANDARD_MASKS,
        home,
        config.work_dir,
        config.credential_file.parent,
        *([config.ssh_key.parent] if config.ssh_key else []),
        *([config.signing_key.parent] if config.signing_key else []),
        *config.masks,
    ]
    seen = dict.fromkeys(PurePosixPath(p) for p in wanted if p.is_dir() and p != Path("/"))
    return tuple(seen)


def _tail(log: Path, size: int) -> str:
    with log.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode("utf-8", errors="replace")


class CheckRunner:
    """Runs the configured checks of ``config`` under ``work_dir/runs``."""

    def __init__(self, config: IntegratorConfig) -> None:
        self.config = config
        try:
            self.program = seccomp.build_filter("implementer")
        except seccomp.SeccompError as exc:
            raise CheckSetupError(f"cannot build the checks' syscall filter: {exc}") from None

    def run_all(self, fresh: Callable[[str], Path], logs: Path) -> list[CheckResult]:
        """Run every check in order in a fresh checkout of the revision (``fresh(name)`` makes
        one); stops at the first that does not pass. A check that fails is run once more, in
        another fresh checkout: passing then, it is flaky (a pass, marked), else it failed."""
        logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        results: list[CheckResult] = []
        tree = fresh("tree")
        for name, check in self.config.checks.items():
            result = self.run_one(name, check, tree, logs / f"{name}.log")
            if not result.passed:
                tree = fresh(f"rerun-{name}")
                again = self.run_one(name, check, tree, logs / f"{name}.rerun.log")
                if again.passed:
                    result = replace(again, flaky=True, first=result.how())
            results.append(result)
            if not result.passed:
                break
        return results

    def describe(self, tree: Path, scratch: Path, argv: list[str]) -> LaunchDescription:
        run, home, tmp = scratch / "run", scratch / "home", scratch / "tmp"
        for path in (run, home, tmp):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return LaunchDescription(
            bwrap=PurePosixPath(self.config.bubblewrap),
            role="implementer",
            mode="host",
            run=PurePosixPath(run),
            clone=PurePosixPath(tree),
            harness_argv=tuple(argv),
            masks=masks_for(self.config),
            writable=(PurePosixPath(home), PurePosixPath(tmp)),
            readonly=tuple(PurePosixPath(p) for p in self.config.expose),
        )

    def environment(self, scratch: Path) -> dict[str, str]:
        return {
            "PATH": self.config.check_path,
            "HOME": str(scratch / "home"),
            "TMPDIR": str(scratch / "tmp"),
            "LANG": "C.UTF-8",
        }

    def run_one(self, name: str, check: CheckConfig, tree: Path, log: Path) -> CheckResult:
        scratch = tree.parent / f"scratch-{tree.name}-{name}"
        desc = self.describe(tree, scratch, check.argv)
        limits = LaunchLimits(self.config.limits, f"agentc-check-{uuid.uuid4().hex[:12]}")
        try:
            limits.create()
        except OSError as exc:
            raise CheckSetupError(f"cannot create the checks' cgroup: {exc}") from None
        started = time.monotonic()
        try:
            code = self._spawn(desc, scratch, log, limits, check.timeout_seconds)
            hit = limits.hit()
        finally:
            limits.remove()
        took = int((time.monotonic() - started) * 1000)
        tail = _tail(log, self.config.log_tail_bytes)
        if code is None:
            return CheckResult(name, check.argv, "timed_out", None, tail, str(log), hit, took)
        outcome = "passed" if code == 0 else "failed"
        return CheckResult(name, check.argv, outcome, code, tail, str(log), hit, took)

    def _spawn(
        self, desc: LaunchDescription, scratch: Path, log: Path, limits: LaunchLimits, timeout: int
    ) -> int | None:
        """Run the sandbox; its exit status, or None when it ran out of time (then killed)."""
        try:
            with log.open("wb") as out:
                proc = confined.spawn(
                    desc, seccomp.program_fd(self.program), limits, out, self.environment(scratch)
                )
        except OSError as exc:
            raise CheckSetupError(f"cannot start the checks' sandbox: {exc}") from None
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None
