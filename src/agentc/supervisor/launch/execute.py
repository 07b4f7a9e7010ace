"""Executing a planned launch: prepare the run, spawn the sandbox, reap, mark terminal.

:func:`execute` creates the private trees and markers, seals the prompt into stdin, becomes
the child subreaper, runs ``bwrap`` in a process group of its own with no_new_privs and every
inherited descriptor close-on-exec, reaps every leftover process of the launch (its group and
cgroup: :class:`agentc.sandbox.reaper.Scope`; another launch of the same process is never
touched) and records how the harness ended: ``exited``
(code 0), ``failed`` (non-zero code) or ``killed`` (a signal; bwrap reports an inner signal
death as 128+n and that is mapped back to the signal).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentc.core.errors import SupervisorError
from agentc.core.roles import role_slug
from agentc.files.procs import dies_with
from agentc.sandbox import bwrap as sandbox
from agentc.sandbox import reaper, seccomp
from agentc.sandbox.bwrap import Relay
from agentc.sandbox.confined import SandboxInfo
from agentc.sandbox.limits import LaunchLimits
from agentc.supervisor.harness import env as harness_env
from agentc.supervisor.harness import registry
from agentc.supervisor.launch import prompt as prompt_mod
from agentc.supervisor.launch import rundir
from agentc.supervisor.launch.plan import Plan
from agentc.supervisor.launch.prompt import SealedPrompt

if TYPE_CHECKING:  # imported where used: a launch without the gateway never needs it
    from agentc.gateway.lease import Lease


@dataclass(frozen=True)
class Outcome:
    """How the harness ended; ``exit_code`` is None when a signal killed it."""

    reason: str
    exit_code: int | None
    signal: str | None
    cap: str | None = None  # the gateway cost cap that refused a model call of this launch
    limit: str | None = None  # the resource limit the launch ran into (memory, processes)
    # The first gateway refusal that ended the launch's model access ({kind, name, reason}).
    stop: dict[str, str] | None = None
    killed: dict[str, int] | None = None  # leftover processes the reaper killed, by name

    @property
    def shell_status(self) -> int:
        if self.exit_code is None:
            return 128 + signal.Signals[self.signal or "SIGKILL"].value
        return self.exit_code if 0 <= self.exit_code <= 255 else 1


def translate_status(returncode: int) -> Outcome:
    """Map a bwrap wait status to an outcome; bwrap reports inner signal n as 128+n."""
    signum: int | None = None
    if returncode < 0:
        signum = -returncode
    elif returncode > 128:
        with contextlib.suppress(ValueError):
            signum = signal.Signals(returncode - 128).value
    if signum is not None:
        return Outcome("killed", None, signal.Signals(signum).name)
    return Outcome("exited" if returncode == 0 else "failed", returncode, None)


HostRelays = Callable[[list[Relay]], contextlib.AbstractContextManager[None]]


def _default_host_relays(relays: list[Relay]) -> contextlib.AbstractContextManager[None]:
    """The host half of the relays (imported only by launches that relay something)."""
    from agentc.egress import addresses, host_relay

    endpoints = [addresses.endpoint(r.name, r.address, r.target, launch=r.launch) for r in relays]
    net_dirs = {Path(r.socket).parent for r in relays}
    host = host_relay.HostRelay(net_dirs.pop(), endpoints)

    @contextlib.contextmanager
    def serving() -> Iterator[None]:
        with host:
            yield

    return serving()


@contextlib.contextmanager
def _forward_termination(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGTERM/SIGINT/SIGHUP to the launch kill the sandbox; the run still ends recorded."""

    def handler(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


@dataclass
class RunningLaunch:
    """A started launch: the sandbox runs; :func:`finish` waits for it and records its end.

    The relays' host half (``stack``), the gateway lease (its sentinel revoked at the end) and
    the cgroup live as long as the launch, in the process that started it.
    """

    plan: Plan
    proc: subprocess.Popen[bytes]
    lease: Lease | None
    limits: LaunchLimits
    stack: contextlib.ExitStack
    info: SandboxInfo
    finished: Outcome | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def scope(self) -> reaper.Scope:
        """What belongs to this launch: its process group (led by bwrap), its cgroup and the
        sandbox's init (a session of its own)."""
        groups = tuple(self.limits.groups)
        return reaper.Scope(self.proc.pid, self.proc.pid, groups, self.info.members())


def execute(plan_: Plan, host_relays: HostRelays | None = None) -> Outcome:
    """Run a planned launch to its end and record it; returns how the harness ended.

    With the gateway, the launch's sentinel is issued (held over the control connection)
    before anything is written and revoked when the launch ends, however it ends. SIGTERM,
    SIGINT and SIGHUP to this process kill the sandbox (the run still ends recorded).
    """
    return wait(start(plan_, host_relays))


def wait(running: RunningLaunch) -> Outcome:
    """Wait for a started launch with SIGTERM, SIGINT and SIGHUP killing its sandbox, then
    :func:`finish` it."""
    with _forward_termination(running.proc):
        running.proc.wait()
    return finish(running)


def start(plan_: Plan, host_relays: HostRelays | None = None) -> RunningLaunch:
    """Prepare the run and spawn the sandbox, in a process group of its own (a loop drains it
    with one signal, and its end reaps that group, never another launch's); returns the
    running launch."""
    lease = None
    if plan_.gateway is not None:
        from agentc.gateway.lease import Lease

        lease = Lease(plan_.gateway.lease)
    sentinel = lease.open() if lease is not None else None
    try:
        return _start(plan_, host_relays, lease, sentinel)
    except BaseException:
        if lease is not None:
            lease.close("the launch did not start")
        raise


def _model_settings(plan_: Plan, sentinel: str) -> dict[str, str]:
    """Write the harness's gateway settings into the run; returns the variables to add."""
    assert plan_.gateway is not None
    request, layout = plan_.request, plan_.layout
    model = None if request.model == "default" else request.model
    most = request.model_policy.max_output_tokens  # the harness asks within the policy
    endpoint = harness_env.ModelEndpoint(plan_.gateway.base_url, sentinel, model, most)
    setup = registry.model_setup(
        request.harness,
        endpoint,
        home=layout.run / "state/home",
        codex_home=layout.run / "state/codex-home",
    )
    try:
        harness_env.write_files(setup, exclusive=True)
    except OSError as exc:
        raise SupervisorError(f"cannot write the harness's model settings: {exc}") from None
    return setup.env


def _prepare(plan_: Plan, sentinel: str | None, env: dict[str, str]) -> tuple[int, int]:
    """Create the run's trees, settings and script; returns the new events and stderr logs."""
    layout = plan_.layout
    rundir.prepare(layout)
    if plan_.gateway is not None and sentinel is not None:
        env.update(_model_settings(plan_, sentinel))
    if "CLAUDE_ENV_FILE" in env:
        # Read-only inside the launch (the run dir is bound read-only): the launch's PATH.
        env_fd = rundir.create_new(Path(env["CLAUDE_ENV_FILE"]), 0o444)
        with os.fdopen(env_fd, "w", encoding="utf-8") as handle:
            handle.write(f"export PATH={shlex.quote(env['PATH'])}\n")
    if plan_.candidate_script is not None:
        # Generated, read-only inside the launch (the run dir is bound read-only).
        script_fd = rundir.create_new(layout.run / plan_.candidate_script_name, 0o500)
        with os.fdopen(script_fd, "w", encoding="utf-8") as handle:
            handle.write(plan_.candidate_script)
    events = rundir.create_new(layout.run / "events.jsonl")
    errors = rundir.create_new(layout.run / "stderr.log")
    return events, errors


def _started_record(plan_: Plan, sealed: SealedPrompt) -> dict[str, Any]:
    request = plan_.request
    return {
        "session_id": request.launch_id,
        "role": request.role,
        "harness": request.harness,
        "prompt_sha256": sealed.sha256,
        "started_unix_nanos": time.time_ns(),
        "model_access": plan_.model_access(),
        **request.agent_session_fields(),
    }


def _spawn(
    plan_: Plan,
    serve: contextlib.ExitStack,
    host_relays: HostRelays | None,
    sealed: SealedPrompt,
    fds: list[int],
    env: dict[str, str],
    limits: LaunchLimits,
    info: SandboxInfo,
) -> subprocess.Popen[bytes]:
    """Spawn the sandbox with the sealed prompt, the logs, the syscall filter and the limits;
    the relays' host half is entered on ``serve`` (left open for the launch's life); bwrap
    tells ``info`` its sandbox's init pid."""
    relays = list(plan_.description.relays)
    events, errors = fds
    try:
        program = seccomp.build_filter(plan_.request.role)
    except seccomp.SeccompError as exc:
        _mark_terminal(plan_, Outcome("failed", None, None))
        raise SupervisorError(f"cannot build the launch's syscall filter: {exc}") from None
    filter_fd = seccomp.program_fd(program)
    passed = (filter_fd, info.write_fd)
    desc = dataclasses.replace(plan_.description, seccomp_fd=filter_fd, info_fd=info.write_fd)
    argv = sandbox.build_argv(desc)

    spawner = os.getpid()

    def child() -> None:
        reaper.child_setup()
        # bwrap's --die-with-parent asks for this only once bwrap runs: a starter killed
        # before then would leave the sandbox running with nobody to end it. Asked (and the
        # starter checked) here, before the exec, it cannot.
        if not dies_with(spawner, signal.SIGKILL):
            raise SupervisorError("the launch's starter has exited")
        for fd in passed:  # bwrap reads the filter (--seccomp), writes its facts (--info-fd)
            os.set_inheritable(fd, True)
        limits.enter()

    try:
        if relays:
            serve.enter_context((host_relays or _default_host_relays)(relays))
        proc = subprocess.Popen(
            argv,
            stdin=sealed.fd,
            stdout=events,
            stderr=errors,
            env=env,
            cwd="/",
            close_fds=True,
            pass_fds=passed,
            preexec_fn=child,
            process_group=0,  # its own: what a drain signals and its end reaps
        )
    except OSError as exc:
        _mark_terminal(plan_, Outcome("failed", None, None))
        raise SupervisorError(f"cannot start {argv[0]}: {exc}") from None
    finally:
        os.close(filter_fd)
        info.spawned()
    return proc


def _start(
    plan_: Plan,
    host_relays: HostRelays | None,
    lease: Lease | None,
    sentinel: str | None,
) -> RunningLaunch:
    request = plan_.request
    env = dict(plan_.env)
    sealed = prompt_mod.seal_prompt(plan_.prompt)
    try:
        open_fds = list(_prepare(plan_, sentinel, env))
    except BaseException:
        sealed.close()
        raise
    if plan_.token is not None:
        adapter = registry.adapter(request.harness)
        assert adapter is not None and adapter.token_env is not None  # the plan read it
        env[adapter.token_env] = plan_.token
    reaper.set_child_subreaper()
    limits = LaunchLimits(plan_.limits, f"agentc-{request.launch_id}")
    try:
        limits.create()
    except OSError as exc:
        sealed.close()
        for fd in open_fds:
            os.close(fd)
        _mark_terminal(plan_, Outcome("failed", None, None))
        raise SupervisorError(f"cannot create the launch's cgroup: {exc}") from None
    stack = contextlib.ExitStack()
    info = SandboxInfo()
    stack.callback(info.close)
    try:
        rundir.write_new_json(plan_.layout.run / ".state-started", _started_record(plan_, sealed))
        proc = _spawn(plan_, stack, host_relays, sealed, open_fds, env, limits, info)
    except BaseException:
        stack.close()
        _print_reaped(reaper.reap_leftovers(reaper.Scope(cgroups=tuple(limits.groups))))
        limits.remove()
        raise
    finally:
        # The host keeps no handle on the prompt or the logs once the child has them.
        sealed.close()
        for fd in open_fds:
            os.close(fd)
    return RunningLaunch(plan_, proc, lease, limits, stack, info)


def _print_reaped(report: reaper.ReapReport) -> None:
    line = report.line()
    if line:
        print(line, file=sys.stderr, flush=True)


def finish(running: RunningLaunch) -> Outcome:
    """Wait for the sandbox, stop the relays, reap every leftover process, revoke the sentinel
    and mark the run terminal; returns how the harness ended (once: a second call repeats it)."""
    if running.finished is not None:
        return running.finished
    plan_ = running.plan
    try:
        returncode = running.proc.wait()
    finally:
        scope = running.scope()
        running.stack.close()
        report = reaper.reap_leftovers(scope)
        hit = running.limits.hit()
        running.limits.remove()
    _print_reaped(report)
    killed = dict(report.killed) or None
    outcome = dataclasses.replace(translate_status(returncode), limit=hit, killed=killed)
    if running.lease is not None:
        # Every process of the launch is gone: nothing can use the sentinel any more.
        end = running.lease.close()
        if end is not None:
            outcome = dataclasses.replace(outcome, cap=end.cap, stop=end.stop)
    _mark_terminal(plan_, outcome)
    running.finished = outcome
    return outcome


def _mark_terminal(plan_: Plan, outcome: Outcome) -> None:
    request = plan_.request
    record: dict[str, Any] = {
        "role": role_slug(request.role),
        "session_id": request.launch_id,
        "finished_unix_nanos": time.time_ns(),
        "reason": outcome.reason,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        **request.agent_session_fields(),
    }
    if plan_.gateway is not None:
        record["cap"] = outcome.cap  # which gateway cost cap refused a model call, or null
        record["stop"] = outcome.stop  # what ended its model access at the gateway, or null
    record["limit"] = outcome.limit  # the resource limit the launch ran into, or null
    record["killed"] = outcome.killed  # leftover processes the reaper killed, or null
    rundir.write_new_json(plan_.layout.run / ".state-terminal.json", record)
