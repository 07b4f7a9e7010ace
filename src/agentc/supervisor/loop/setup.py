"""A project's setup command (``[setup.<project-id>]``): run in the clone before the harness.

The command runs in the launch's own sandbox: the harness's planned ``bwrap`` description
(masks, read-only run directory, writable private trees and clone, the same environment,
network namespace and relays, the role's syscall filter, no_new_privs and resource limits)
with only the init command swapped for the setup's argv, and without the gateway's relay (the
setup gets no model sentinel). Each ``cache_paths`` entry is bound writable at the same path,
for the setup and then for the harness. Stdin is ``/dev/null``; stdout and stderr go to
``$RUN/setup.log`` (created new, 0600). The command is killed (its whole process group, and
every leftover process reaped) after ``timeout_seconds``, or when the loop is stopped.

A non-zero exit, a signal or a timeout raises :class:`SetupFailed`, whose message names the
failure and ends with the tail of the log; the loop then releases the attempt with that
handoff and never starts the harness. The repository cannot add a command or a cache: both
come only from the host's ``supervisor.toml``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from agentc.core.errors import ConfigError, SupervisorError
from agentc.files import read_tail
from agentc.files.paths import within
from agentc.sandbox import bwrap as sandbox
from agentc.sandbox import confined, reaper, seccomp, toolpaths
from agentc.sandbox.limits import LaunchLimits
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import rundir
from agentc.supervisor.launch.execute import translate_status
from agentc.supervisor.launch.plan import Plan
from agentc.supervisor.loop.settings import ProjectSetup

SETUP_LOG = "setup.log"
TAIL_CHARS = 1000
TAIL_READ = 64 * 1024


class SetupFailed(SupervisorError):
    """The setup command failed, timed out or could not start (the message says which)."""


def command_of(config: SupervisorConfig, project: str) -> ProjectSetup | None:
    """The project's setup entry when it has a command (None: nothing to run)."""
    entry = config.setup.get(project)
    return entry if entry is not None and entry.command else None


def _owner_uid(config: SupervisorConfig) -> int:
    """The uid the launch writes as: the implementer account (host mode) or the invoking user."""
    if config.mode == "host":
        try:
            return pwd.getpwnam(config.implementer_user).pw_uid
        except KeyError:
            raise ConfigError(
                f"implementer_user: the account {config.implementer_user} does not exist"
            ) from None
    return os.getuid()


def cache_paths(config: SupervisorConfig, project: str) -> list[Path]:
    """The project's cache paths, checked (raises naming the key): each an existing directory
    given as its canonical path (no symlink anywhere on it), owned by the launch's uid, neither
    the root nor inside or around the state root (which every launch masks)."""
    entry = config.setup.get(project)
    if entry is None:
        return []
    state = Path(os.path.realpath(config.resolved_state_dir()))
    key = f"setup.{project}.cache_paths"
    paths: list[Path] = []
    for path in entry.cache_paths:
        try:
            info = os.lstat(path)
        except OSError as exc:
            raise ConfigError(f"{key}: {path} cannot be used ({exc.strerror})") from None
        if os.path.realpath(path) != str(path) or stat.S_ISLNK(info.st_mode):
            raise ConfigError(f"{key}: {path} must be reached without symlinks")
        if not stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{key}: {path} is not a directory")
        if path == Path("/") or within(state, path) or within(path, state):
            raise ConfigError(f"{key}: {path} overlaps the state root {state}")
        uid = _owner_uid(config)
        if info.st_uid != uid:
            raise ConfigError(f"{key}: {path} is owned by uid {info.st_uid}, not {uid}")
        paths.append(path)
    return paths


def check(config: SupervisorConfig) -> None:
    """At startup: refuse (naming the key) a setup the loop cannot run."""
    for project, entry in config.setup.items():
        cache_paths(config, project)
        if entry.command and not entry.command[0]:
            raise ConfigError(f"setup.{project}.command: the program name is empty")


def with_caches(plan: Plan, caches: list[Path]) -> Plan:
    """The plan with each cache path bound writable at the same path (the harness's too)."""
    if not caches:
        return plan
    writable = plan.description.writable + tuple(PurePosixPath(p) for p in caches)
    description = dataclasses.replace(plan.description, writable=writable)
    return dataclasses.replace(plan, description=description, argv=sandbox.build_argv(description))


def _program(config: SupervisorConfig, plan: Plan, name: str) -> Path:
    """The setup program: an absolute path, or found on the launch's PATH (host side)."""
    if name.startswith("/"):
        found: str | None = name
    else:
        found = shutil.which(name, path=plan.env["PATH"])
    if found is None or not os.access(found, os.X_OK):
        raise SetupFailed(f"project setup cannot start: {name} is not on the launch's PATH")
    return Path(found)


def _exposed(config: SupervisorConfig, plan: Plan, program: Path) -> tuple[PurePosixPath, ...]:
    """Read-only bind-backs for what a mask would hide of the setup program (as for the
    harness: its symlink hops, package root and interpreter)."""
    desc = plan.description
    masks = [Path(m) for m in desc.masks]
    try:
        trees = toolpaths.program_trees(program, plan.env["PATH"])
    except toolpaths.ToolPathError as exc:
        raise SetupFailed(f"project setup cannot start: {exc}") from None
    state = plan.layout.state_dir
    extra: list[PurePosixPath] = []
    for tree in trees:
        real = Path(os.path.realpath(tree))
        if within(real, state):
            raise SetupFailed(
                f"project setup cannot start: {program} is inside the state root, which every "
                "launch masks"
            )
        hidden = any(within(real, m) for m in masks)
        pure = PurePosixPath(real)
        if hidden and pure not in desc.readonly and pure not in extra and real.is_dir():
            extra.append(pure)
    return tuple(extra)


def description(
    config: SupervisorConfig, plan: Plan, command: list[str], caches: list[Path]
) -> sandbox.LaunchDescription:
    """The harness's sandbox with the setup's argv, the caches, and no gateway relay."""
    desc = plan.description
    program = _program(config, plan, command[0])
    relays = tuple(r for r in desc.relays if r.name != "gateway")
    return dataclasses.replace(
        desc,
        harness_argv=(str(program), *command[1:]),
        relays=relays,
        relay_program=desc.relay_program if relays else (),
        writable=desc.writable + tuple(PurePosixPath(p) for p in caches),
        readonly=desc.readonly + _exposed(config, plan, program),
    )


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    """The last ``chars`` characters of the log (never following a link), printable only."""
    try:
        text = read_tail(path, TAIL_READ).decode("utf-8", "replace")
    except OSError:
        return ""
    text = "".join(c if c.isprintable() or c == "\n" else "?" for c in text).strip()
    return text[-chars:]


def _host_relays(relays: tuple[sandbox.Relay, ...]) -> contextlib.AbstractContextManager[object]:
    if not relays:
        return contextlib.nullcontext()
    from agentc.egress import addresses, host_relay

    endpoints = [addresses.endpoint(r.name, r.address, r.target, launch=r.launch) for r in relays]
    return host_relay.HostRelay(Path(relays[0].socket).parent, endpoints)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run(
    config: SupervisorConfig,
    plan: Plan,
    project: str,
    *,
    stopping: Callable[[], bool] = lambda: False,
) -> Plan:
    """Run the project's setup command for ``plan`` (nothing without one); returns the plan
    the harness starts with (the cache paths bound). Raises :class:`SetupFailed`."""
    entry = command_of(config, project)
    caches = cache_paths(config, project)
    if entry is None:
        return with_caches(plan, caches)
    desc = description(config, plan, entry.command, caches)
    log_path = plan.layout.run / SETUP_LOG
    log_fd = rundir.create_new(log_path)
    try:
        filter_fd = seccomp.program_fd(seccomp.build_filter(plan.request.role))
    except seccomp.SeccompError as exc:
        os.close(log_fd)
        raise SetupFailed(f"project setup cannot start: no syscall filter ({exc})") from None
    limits = LaunchLimits(plan.limits, f"agentc-setup-{plan.request.launch_id}")
    reaper.set_child_subreaper()
    try:
        limits.create()
    except OSError as exc:
        os.close(log_fd)
        os.close(filter_fd)
        raise SetupFailed(f"project setup cannot start: no cgroup ({exc})") from None

    reason: str | None = None
    group: int | None = None  # the setup's own process group, once it runs
    info = confined.SandboxInfo()
    try:
        with _host_relays(desc.relays):
            try:
                proc = confined.spawn(desc, filter_fd, limits, log_fd, plan.env, info)
            except OSError as exc:
                raise SetupFailed(f"project setup cannot start its sandbox: {exc}") from None
            finally:
                os.close(log_fd)
            group = proc.pid
            deadline = time.monotonic() + entry.timeout_seconds
            while True:
                try:
                    proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() >= deadline:
                    reason = f"project setup ran longer than {entry.timeout_seconds} s"
                elif stopping():
                    reason = "project setup was stopped: the host supervisor stopped"
                if reason is not None:
                    _kill(proc)
                    proc.wait()
                    break
            _kill(proc)  # nothing of the setup's group may outlive it
    finally:  # the setup's own group, cgroup and init: never another launch's processes
        scope = reaper.Scope(group, group, tuple(limits.groups), info.members())
        reaper.reap_leftovers(scope)
        info.close()
        limits.remove()
    if reason is None and proc.returncode != 0:
        outcome = translate_status(proc.returncode)
        how = (
            f"exit code {outcome.exit_code}"
            if outcome.exit_code is not None
            else f"killed by {outcome.signal}"
        )
        reason = f"project setup failed ({how})"
    if reason is not None:
        shown = tail(log_path)
        text = f"{reason}; see {SETUP_LOG}"
        raise SetupFailed(text + (f". Its output ends with:\n{shown}" if shown else ""))
    return with_caches(plan, caches)
