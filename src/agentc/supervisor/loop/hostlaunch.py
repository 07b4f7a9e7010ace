"""Host mode's launches from the loop: fork the warm loop, become the role account, launch.

The loop runs as root. Before a launch it hands the fresh run and clone it made (nothing else
has written them) to the role account (:func:`hand_over`, never following a link), and makes
the launch's cgroup as root. :func:`start` then forks: the child leads a process group of its
own, joins the cgroup and becomes the role account with
:func:`agentc.files.accounts.become` (``launch-root``'s account switch), and runs the
launch as ``agentc-supervisor launch`` does under ``launch-root``: the plan (which checks the
account), the launch preflight, the run's private trees and markers, the sandbox, the reaping
and the terminal record, all as the role. No interpreter starts: the child is a fork of the
loop. The child reports over a pipe whether the sandbox started (or why not), so a refused
launch is a failure the loop names in its handoff; the loop then supervises the child like a
personal-mode launch (the same drain: SIGTERM to the group, SIGKILL after ``drain_seconds``).
When it ends, the cgroup is removed (anything left in it killed) and a limit it counted is
named in the run's ``.state-terminal.json``, as ``launch-root`` does. Like a personal-mode
launch it dies with the loop: the child asks for SIGTERM when its parent exits, which kills the
sandbox and still records the run's end.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import select
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.files.accounts import become
from agentc.files.procs import dies_with
from agentc.sandbox import reaper
from agentc.sandbox.limits import LaunchLimits
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import execute as launch_execute
from agentc.supervisor.launch import plan as launch_plan
from agentc.supervisor.launch import preflight
from agentc.supervisor.launch import root as launch_root
from agentc.supervisor.launch.execute import Outcome
from agentc.supervisor.launch.plan import Plan
from agentc.supervisor.launch.request import LaunchRequest
from agentc.supervisor.loop import setup as project_setup

PR_SET_DUMPABLE = 4
START_SECONDS = 120.0  # the child's plan, preflight and sandbox start
_STARTED = b"started"
_SETUP_FAILED = "setup failed: "  # a report naming a failed setup (its handoff keeps the log)
_ERROR_BYTES = 4000


def hand_over(account: pwd.struct_passwd, *trees: Path) -> None:
    """Give each tree (made by root for this launch) to ``account``, never following links;
    a tree that is no longer a real directory of root's is refused."""
    uid, gid = account.pw_uid, account.pw_gid
    for tree in trees:
        info = os.lstat(tree)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise SupervisorError(f"{tree} is no longer the directory the loop made")
        os.chown(tree, uid, gid, follow_symlinks=False)
        for _dir, dirs, files, dir_fd in os.fwalk(tree, follow_symlinks=False):
            for name in dirs + files:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)


class ForkedProcess:
    """The forked launch as the loop sees it: what it uses of :class:`subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"launch {self.pid}", timeout or 0.0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode


@dataclass
class RoleLaunch:
    """A host-mode launch running as its role account (the loop's child, a group leader)."""

    request: LaunchRequest
    proc: ForkedProcess
    limits: LaunchLimits
    finished: Outcome | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid


Running = launch_execute.RunningLaunch | RoleLaunch


@dataclass
class Preparation:
    """What runs between a launch's plan and its sandbox: ``project``'s setup command
    (``[setup.<project>]``, :func:`agentc.supervisor.loop.setup.run`), if it has one; it gives
    up when ``stopping`` says so."""

    project: str | None = None
    stopping: Callable[[], bool] = lambda: False

    def run(self, config: SupervisorConfig, plan: Plan, *, in_fork: bool = False) -> Plan:
        """The plan the harness starts with. In host mode's fork (as the role) the worker
        watches for a stop instead."""
        if self.project is None:
            return plan
        if in_fork:
            return project_setup.run(config, plan, self.project)
        return project_setup.run(config, plan, self.project, stopping=self.stopping)

    def seconds(self, config: SupervisorConfig) -> float:
        """How long the setup may run (0 without one)."""
        entry = project_setup.command_of(config, self.project) if self.project else None
        return float(entry.timeout_seconds) if entry is not None else 0.0


def start(
    config: SupervisorConfig, request: LaunchRequest, preparation: Preparation | None = None
) -> Running:
    """Start one launch of the loop: planned, checked, prepared (the project's setup command)
    and spawned from the loop's own process in personal mode (in a process group of its own),
    or all of it as the role's account in a fork in host mode. Returns once its sandbox runs,
    or raises why it did not start (:class:`~agentc.supervisor.loop.setup.SetupFailed` for a
    failed setup)."""
    preparation = preparation or Preparation()
    if config.mode == "host":
        return start_as_role(config, request, preparation)
    plan = launch_plan.plan(config, request)
    preflight.require(config, plan)
    return launch_execute.start(preparation.run(config, plan))


def finish(running: Running) -> Outcome:
    """Wait for the launch and record its end; returns how the harness ended."""
    if isinstance(running, RoleLaunch):
        return finish_role(running)
    return launch_execute.finish(running)


def start_as_role(
    config: SupervisorConfig, request: LaunchRequest, preparation: Preparation
) -> RoleLaunch:
    """Fork the launch as the role's account; returns once its sandbox runs (or raises why
    it did not start). The preparation (the project's setup) runs in the fork, as the role;
    a stopping loop ends the fork."""
    account = launch_root.role_account(config, request.role)
    limits = LaunchLimits(config.limits, f"agentc-{request.launch_id}")
    try:
        limits.create()
    except OSError as exc:
        raise SupervisorError(f"cannot create the launch's cgroup: {exc}") from None
    read_fd, write_fd = os.pipe()
    loop_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        limits.remove()
        raise
    if pid == 0:  # the launch, as the role account; never returns
        os.close(read_fd)
        _child(config, request, account, limits, write_fd, loop_pid, preparation)
    os.close(write_fd)
    proc = ForkedProcess(pid)
    try:
        report = _read_report(read_fd, pid, config, preparation)
    finally:
        os.close(read_fd)
    if report != _STARTED:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # if it did not lead its group yet
        proc.wait()
        limits.remove()
        why = report.decode("utf-8", "replace") or f"the launch exited ({proc.returncode})"
        if why.startswith(_SETUP_FAILED):
            raise project_setup.SetupFailed(why.removeprefix(_SETUP_FAILED))
        raise SupervisorError(f"the launch as {account.pw_name} did not start: {why}")
    return RoleLaunch(request, proc, limits)


def _read_report(fd: int, pid: int, config: SupervisorConfig, preparation: Preparation) -> bytes:
    """The fork's report: started, or why not. A stopping loop ends the fork (its setup's
    sandbox dies with it) and says so."""
    data = b""
    limit = START_SECONDS + preparation.seconds(config)
    deadline = time.monotonic() + limit
    while len(data) <= _ERROR_BYTES:
        left = deadline - time.monotonic()
        if not select.select([fd], [], [], max(0.0, min(left, 1.0)))[0]:
            if preparation.stopping():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                if preparation.seconds(config):  # the fork may be in the project's setup
                    stopped = "project setup was stopped: the host supervisor stopped"
                    return (_SETUP_FAILED + stopped).encode()
                return b"the host supervisor stopped"
            if time.monotonic() >= deadline:
                return b"it did not start within %d s" % limit
            continue
        chunk = os.read(fd, _ERROR_BYTES)
        if not chunk:
            break
        data += chunk
    return data.strip()


def _child(
    config: SupervisorConfig,
    request: LaunchRequest,
    account: pwd.struct_passwd,
    limits: LaunchLimits,
    report_fd: int,
    loop_pid: int,
    preparation: Preparation,
) -> None:
    code = 3
    try:
        os.setpgid(0, 0)  # the loop drains the launch with one signal to this group
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        limits.enter()  # the cgroup and the rlimits, before the uid switch
        become(account)
        # After the switch (which clears it): the launch dies with its loop, as a personal-mode
        # launch does (SIGTERM: the sandbox is killed and the run still ends recorded).
        if not dies_with(loop_pid, signal.SIGTERM):
            raise SupervisorError("the loop exited")
        # It still holds descriptors the loop opened as root (none reach the sandbox: every
        # one is close-on-exec): no process of the role's may trace it or open them via /proc.
        reaper.prctl(PR_SET_DUMPABLE, 0)
        os.chdir("/")
        plan = launch_plan.plan(config, request)
        preflight.require(config, plan)
        running = launch_execute.start(preparation.run(config, plan, in_fork=True))
        os.write(report_fd, _STARTED)
        os.close(report_fd)
        report_fd = -1
        code = launch_execute.wait(running).shell_status
    except BaseException as exc:
        if report_fd >= 0:
            text = str(exc) or type(exc).__name__
            if isinstance(exc, project_setup.SetupFailed):
                text = _SETUP_FAILED + text
            try:
                os.write(report_fd, text.encode("utf-8", "replace")[:_ERROR_BYTES])
            except OSError:
                pass
    finally:
        os._exit(code)


def finish_role(running: RoleLaunch) -> Outcome:
    """Wait for the launch, remove its cgroup and name a limit it counted; returns how the
    harness ended (from the child's status: the launch's exit status, 128+n for signal n)."""
    if running.finished is not None:
        return running.finished
    try:
        code = running.proc.wait()
        hit = running.limits.hit()
    finally:
        running.limits.remove()
    if hit is not None:
        launch_root.name_limit(running.request.run, hit)
    running.finished = replace(launch_execute.translate_status(code), limit=hit)
    return running.finished
